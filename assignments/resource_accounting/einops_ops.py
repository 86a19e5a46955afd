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
    raise NotImplementedError('attention_scores in resource_accounting/einops_ops.py is not implemented yet: write it (handout §2 Named dimensions with einops)')


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """`... seq (heads d) -> ... heads seq d`: head h owns features h*d to (h+1)*d - 1.

    ValueError unless num_heads >= 1 divides the last dimension.

    Handout: §2 Named dimensions with einops
    """
    raise NotImplementedError('split_heads in resource_accounting/einops_ops.py is not implemented yet: write it (handout §2 Named dimensions with einops)')


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """`... heads seq d -> ... seq (heads d)`, the inverse of split_heads. ValueError below 3 dims.

    Handout: §2 Named dimensions with einops
    """
    raise NotImplementedError('merge_heads in resource_accounting/einops_ops.py is not implemented yet: write it (handout §2 Named dimensions with einops)')
