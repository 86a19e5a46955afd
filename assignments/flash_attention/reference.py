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
    raise NotImplementedError('check_attention_inputs in flash_attention/reference.py is not implemented yet: write it (handout §3 Reference attention and the input contract)')


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    """softmax(q kᵀ / sqrt(d)) v over the last two dims; causal: query i sees only keys j <= i.

    Shapes (..., n_queries, d), (..., n_keys, d), (..., n_keys, d) -> (..., n_queries, d), in the
    input dtype. Computed in that dtype too, as a naive implementation would be.

    Handout: §3 Reference attention and the input contract
    """
    raise NotImplementedError('attention in flash_attention/reference.py is not implemented yet: write it (handout §3 Reference attention and the input contract)')
