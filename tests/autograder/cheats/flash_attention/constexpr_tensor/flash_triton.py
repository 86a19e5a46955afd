"""A cheat: the tensors passed as tl.constexpr arguments, so that under the interpreter the "kernel"
gets torch tensors and torch does the arithmetic inside it."""

import math

import kernels  # noqa: F401
import torch
import triton
import triton.language as tl


@triton.jit
def _kernel(O, Q: tl.constexpr, K: tl.constexpr, V: tl.constexpr):
    tl.program_id(0)


def flash_forward_triton(q, k, v, is_causal=False, q_tile=None, k_tile=None):
    o = torch.empty_like(q)
    _kernel[(1,)](o, Q=q, K=k, V=v)
    return o, torch.empty(q.shape[:-1])
