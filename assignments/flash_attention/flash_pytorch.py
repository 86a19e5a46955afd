"""FlashAttention-2 in plain PyTorch: the algorithm, one tile at a time, before any kernel.

The forward walks over query tiles; for each it streams over key tiles, keeping only a running
row maximum m, a running softmax denominator l and an unnormalised output accumulator. No
(n_queries x n_keys) matrix ever exists: the largest intermediate is one (q_tile x k_tile) score
tile per (batch, head). The backward recomputes each score tile from q, k and the saved lse
instead of storing the probabilities.

Every tensor may have any leading dims (batch, heads, ...): they are flattened into one batch dim
B, and the tile loops run over the sequence dims for all B at once. Arithmetic is fp32 throughout;
outputs come back in the input dtype, lse in float32.
"""

import math

import torch

from flash_attention.reference import check_attention_inputs


def _check_tiles(q_tile: int, k_tile: int) -> None:
    for name, tile in (("q_tile", q_tile), ("k_tile", k_tile)):
        if type(tile) is not int or tile <= 0:
            raise ValueError(f"{name} must be a positive int, got {tile!r}")


def _above_diagonal(q_start: int, q_end: int, k_start: int, k_end: int, device: torch.device) -> torch.Tensor:
    """The (q_end - q_start, k_end - k_start) mask of a score tile that is True where key j > query i."""
    rows = torch.arange(q_start, q_end, device=device)
    cols = torch.arange(k_start, k_end, device=device)
    return rows[:, None] < cols[None, :]


def flash_forward_pytorch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
                          q_tile: int = 32, k_tile: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """Tiled attention forward with the online softmax: returns (o, lse).

    o is (..., n_queries, d) in q's dtype; lse is (..., n_queries) float32, the natural-log logsumexp
    of each row of scaled (and, when causal, masked) scores.

    Handout: §5 The online softmax
    """
    raise NotImplementedError('flash_forward_pytorch in flash_attention/flash_pytorch.py is not implemented yet: write it (handout §5 The online softmax)')


def _forward_query_tile(q_rows: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_start: int, scale: float,
                        is_causal: bool, k_tile: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) of the query rows q_start... (q_rows is (B, rows, d)), streaming over key tiles.

    Handout: §5 The online softmax
    """
    raise NotImplementedError('_forward_query_tile in flash_attention/flash_pytorch.py is not implemented yet: write it (handout §5 The online softmax)')


def flash_backward_pytorch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                           do: torch.Tensor, is_causal: bool = False, q_tile: int = 32,
                           k_tile: int = 32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashAttention-2 backward by recomputation: returns (dq, dk, dv) in the dtypes of q, k, v.

    o and do are (..., n_queries, d), lse is (..., n_queries) as returned by the forward. With
    D = rowsum(o * do), each score tile is recomputed as P = exp(S - lse), and then
    dV += Pᵀ dO, dP = dO Vᵀ, dS = P * (dP - D), dQ += dS K / sqrt(d), dK += dSᵀ Q / sqrt(d).

    Handout: §6 The backward by recomputation
    """
    raise NotImplementedError('flash_backward_pytorch in flash_attention/flash_pytorch.py is not implemented yet: write it (handout §6 The backward by recomputation)')


def _backward_key_tile(q, k_cols, v_cols, do, lse, delta, dq, k_start: int, scale: float, is_causal: bool,
                       q_tile: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(dk, dv) of the key rows k_start... (k_cols is (B, cols, d)); adds their share of dq into dq.

    Handout: §6 The backward by recomputation
    """
    raise NotImplementedError('_backward_key_tile in flash_attention/flash_pytorch.py is not implemented yet: write it (handout §6 The backward by recomputation)')


class FlashAttentionPytorch(torch.autograd.Function):
    """`FlashAttentionPytorch.apply(q, k, v, is_causal=False)` -> o, differentiable in q, k and v.

    Saves q, k, v, o and lse for backward: lse is the only saved tensor of shape (..., n_queries),
    and nothing of n_queries x n_keys elements is kept.

    Handout: §6 The backward by recomputation
    """

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
        raise NotImplementedError('FlashAttentionPytorch.forward in flash_attention/flash_pytorch.py is not implemented yet: write it (handout §6 The backward by recomputation)')

    @staticmethod
    def backward(ctx, do: torch.Tensor):
        raise NotImplementedError('FlashAttentionPytorch.backward in flash_attention/flash_pytorch.py is not implemented yet: write it (handout §6 The backward by recomputation)')
