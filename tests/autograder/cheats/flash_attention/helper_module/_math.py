"""Host arithmetic, moved out of flash_triton.py."""

import math

import torch


def scaled_scores(q, k):
    return torch.matmul(q, k.transpose(-1, -2)) * (1 / math.sqrt(q.shape[-1]))


def mix(s, v):
    return torch.softmax(s, -1).matmul(v)


def row_lse(s):
    return s.logsumexp(-1)
