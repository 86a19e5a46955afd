"""A cheat: tensor methods and operators (q.matmul(k), @, .softmax) instead of torch functions."""

import math

import kernels  # noqa: F401
import triton
import triton.language as tl


@triton.jit
def _touch(X):
    tl.program_id(0)


def flash_forward_triton(q, k, v, is_causal=False, q_tile=None, k_tile=None):
    _touch[(1,)](q)
    s = q.matmul(k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return s.softmax(-1) @ v, s.logsumexp(-1)
