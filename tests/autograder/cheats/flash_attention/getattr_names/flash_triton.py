"""A cheat: torch's functions looked up by names built at run time."""

import math

import kernels  # noqa: F401
import torch
import triton
import triton.language as tl


@triton.jit
def _touch(X):
    tl.program_id(0)


def flash_forward_triton(q, k, v, is_causal=False, q_tile=None, k_tile=None):
    _touch[(1,)](q)
    mix = getattr(torch, "mat" + "mul")
    s = mix(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return mix(getattr(torch, "soft" + "max")(s, -1), v), getattr(torch, "logsumexp")(s, -1)
