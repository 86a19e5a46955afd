"""Tensor shapes with names: attention scores and head splitting written with einops.

Every function takes any number of leading batch dimensions (`...`): (seq, hidden), (batch, seq,
hidden) and (batch, heads, seq, hidden) all work. These must be written with einops (`einsum` for
the scores, `rearrange` for the heads), not with transpose/view/matmul: naming the axes is the lesson.
"""

from __future__ import annotations

import torch
from einops import einsum, rearrange


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Dot products of every query with every key: `... seq1 hidden, ... seq2 hidden -> ... seq1 seq2`.

    No 1/sqrt(hidden) scaling. ValueError when the ranks, leading dims or hidden sizes differ.

    Handout: §2 Named dimensions with einops
    """
    ### BEGIN SOLUTION
    if q.dim() < 2 or q.dim() != k.dim() or q.shape[:-2] != k.shape[:-2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must be (..., seq, hidden) with the same leading dims and hidden size; "
            f"got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    return einsum(q, k, "... seq1 hidden, ... seq2 hidden -> ... seq1 seq2")
    ### END SOLUTION


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """`... seq (heads d) -> ... heads seq d`: head h owns features h*d to (h+1)*d - 1.

    ValueError unless num_heads >= 1 divides the last dimension.

    Handout: §2 Named dimensions with einops
    """
    ### BEGIN SOLUTION
    if x.dim() < 2 or type(num_heads) is not int or num_heads < 1 or x.shape[-1] % num_heads:
        raise ValueError(
            f"split_heads needs x of shape (..., seq, heads * d) and a positive num_heads dividing its "
            f"last dim; got x {tuple(x.shape)} and num_heads={num_heads!r}"
        )
    return rearrange(x, "... seq (heads d) -> ... heads seq d", heads=num_heads)
    ### END SOLUTION


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """`... heads seq d -> ... seq (heads d)`, the inverse of split_heads. ValueError below 3 dims.

    Handout: §2 Named dimensions with einops
    """
    ### BEGIN SOLUTION
    if x.dim() < 3:
        raise ValueError(f"merge_heads needs x of shape (..., heads, seq, d), got {tuple(x.shape)}")
    return rearrange(x, "... heads seq d -> ... seq (heads d)")
    ### END SOLUTION
