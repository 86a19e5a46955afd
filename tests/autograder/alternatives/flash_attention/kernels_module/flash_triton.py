"""FlashAttention in Triton with the host side apart: the kernels (and the backward) live in _kernels.py
(the reference's flash_triton.py, written there by the tests).

Another correct way to write the host code: tiles checked by a helper of its own, the leading dims
unpacked with a starred assignment, a grid computed by a lambda from the meta-parameters, the lse
allocated with `new_empty`, and the autograd Function keeping its flag under another name.
"""

import math

import kernels  # noqa: F401  (select the interpreter before Triton is imported)
import torch

from flash_attention import _kernels as K
from flash_attention._kernels import _flash_fwd_kernel, flash_backward_triton, triton
from flash_attention.reference import check_attention_inputs


def _tile(name: str, tile, default: int) -> int:
    tile = default if tile is None else tile
    if type(tile) is not int or tile < 16 or tile & (tile - 1):
        raise ValueError(f"{name} must be a power of two >= 16, got {tile!r}")
    return tile


def flash_forward_triton(q, k, v, is_causal=False, q_tile=None, k_tile=None):
    check_attention_inputs(q, k, v, is_causal)
    defaults = (128, 64) if q.is_cuda else (32, 32)
    q_tile, k_tile = _tile("q_tile", q_tile, defaults[0]), _tile("k_tile", k_tile, defaults[1])
    K._require_triton()
    *lead, n_queries, head_dim = q.shape
    n_keys = k.shape[-2]
    batch = math.prod(lead)
    q3, k3, v3 = (x.reshape(batch, -1, head_dim) for x in (q, k, v))
    o = torch.empty_like(q3)
    lse = q3.new_empty((batch, n_queries), dtype=torch.float32)
    grid = lambda meta: (triton.cdiv(n_queries, meta["Q_TILE"]), batch)  # noqa: E731
    _flash_fwd_kernel[grid](
        q3, k3, v3, o, lse, *q3.stride(), *k3.stride(), *v3.stride(), *o.stride(), n_queries, n_keys,
        K.LOG2E / math.sqrt(head_dim), HEAD_DIM=head_dim, D_PAD=max(16, triton.next_power_of_2(head_dim)),
        Q_TILE=q_tile, K_TILE=k_tile, IS_CAUSAL=bool(is_causal), DOT_FP32=K._dot_in_fp32(q))
    return o.view(q.shape), lse.view(*lead, n_queries)


class FlashAttentionTriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        o, lse = flash_forward_triton(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = is_causal
        return o

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, o, lse = ctx.saved_tensors
        return (*flash_backward_triton(q, k, v, o, lse, grad_out.contiguous(), ctx.causal), None)
