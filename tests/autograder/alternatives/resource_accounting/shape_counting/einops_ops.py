"""Named dimensions, another correct way: other axis names, explicit head size, checks before the patterns."""

from __future__ import annotations

import torch
from einops import einsum, rearrange


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    ok = q.ndim >= 2 and k.ndim == q.ndim and tuple(q.shape[:-2]) == tuple(k.shape[:-2]) and q.shape[-1] == k.shape[-1]
    if not ok:
        raise ValueError(f"attention_scores: q {tuple(q.shape)} and k {tuple(k.shape)} do not match")
    return einsum(q, k, "... i d, ... j d -> ... i j")


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads <= 0 or x.ndim < 2:
        raise ValueError(f"split_heads: bad num_heads {num_heads!r} for x {tuple(x.shape)}")
    head_dim, rest = divmod(x.shape[-1], num_heads)
    if rest:
        raise ValueError(f"split_heads: {num_heads} heads do not divide the width {x.shape[-1]}")
    return rearrange(x, "... s (h e) -> ... h s e", e=head_dim)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    if x.ndim < 3:
        raise ValueError(f"merge_heads: x must have at least 3 dims, got {tuple(x.shape)}")
    return rearrange(x, "... h s e -> ... s (h e)")
