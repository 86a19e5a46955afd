"""A cheat: torch's matmul and softmax under other names (import aliases and plain assignments)."""

import math

import kernels  # noqa: F401
import torch as T
import triton
import triton.language as tl
from torch import einsum as contract

spread = T.softmax


@triton.jit
def _touch(X):
    tl.program_id(0)


def flash_forward_triton(q, k, v, is_causal=False, q_tile=None, k_tile=None):
    _touch[(1,)](q)
    s = contract("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    return contract("...qk,...kd->...qd", spread(s, -1), v), T.logsumexp(s, -1)
