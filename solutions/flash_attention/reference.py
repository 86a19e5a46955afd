"""Standard attention, written the obvious way: the baseline every FlashAttention is checked against.

It materialises the full (..., n_queries, n_keys) score matrix, which is exactly what FlashAttention
avoids; at N = 16384 that matrix is 16384² * 2 bytes = 512 MiB per head in bf16.
"""

from __future__ import annotations

import math

import torch


def check_attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> None:
    """Raise ValueError unless q, k, v follow the input contract of every attention in this assignment.

    q is (..., n_queries, d), k and v are (..., n_keys, d) with the same leading dims, one dtype and
    one device; causal attention needs n_queries == n_keys.

    Handout: §3 Reference attention and the input contract
    """
    ### BEGIN SOLUTION
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dim() < 2:
            raise ValueError(f"{name} must be (..., seq, head_dim), got shape {tuple(x.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape (..., n_keys, d), got {tuple(k.shape)} and "
                         f"{tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same head dim, got {q.shape[-1]} and {k.shape[-1]}")
    if q.shape[:-2] != k.shape[:-2]:
        raise ValueError(f"q and k must have the same leading (batch, heads) dims, got "
                         f"{tuple(q.shape[:-2])} and {tuple(k.shape[:-2])}")
    if not (q.dtype == k.dtype == v.dtype) or not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must share one dtype and device, got {q.dtype}/{q.device}, "
                         f"{k.dtype}/{k.device}, {v.dtype}/{v.device}")
    if is_causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal attention needs n_queries == n_keys, got {q.shape[-2]} and {k.shape[-2]}; "
                         "pass is_causal=False for cross-attention")
    ### END SOLUTION


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    """softmax(q kᵀ / sqrt(d)) v over the last two dims; causal: query i sees only keys j <= i.

    Shapes (..., n_queries, d), (..., n_keys, d), (..., n_keys, d) -> (..., n_queries, d), in the
    input dtype. Computed in that dtype too, as a naive implementation would be.

    Handout: §3 Reference attention and the input contract
    """
    ### BEGIN SOLUTION
    check_attention_inputs(q, k, v, is_causal)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = q.shape[-2]
        above_diagonal = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(above_diagonal, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
    ### END SOLUTION
