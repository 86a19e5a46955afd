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
    ### BEGIN SOLUTION
    check_attention_inputs(q, k, v, is_causal)
    _check_tiles(q_tile, k_tile)
    n_queries, head_dim = q.shape[-2:]
    q3, k3, v3 = (x.reshape(-1, x.shape[-2], head_dim) for x in (q, k, v))
    o = torch.empty_like(q3)
    lse = torch.empty(q3.shape[:-1], dtype=torch.float32, device=q.device)
    scale = 1 / math.sqrt(head_dim)
    for q_start in range(0, n_queries, q_tile):
        rows = slice(q_start, min(q_start + q_tile, n_queries))
        o[:, rows], lse[:, rows] = _forward_query_tile(q3[:, rows], k3, v3, q_start, scale, is_causal, k_tile)
    return o.reshape(q.shape), lse.reshape(q.shape[:-1])
    ### END SOLUTION


def _forward_query_tile(q_rows: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_start: int, scale: float,
                        is_causal: bool, k_tile: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) of the query rows q_start... (q_rows is (B, rows, d)), streaming over key tiles.

    Handout: §5 The online softmax
    """
    ### BEGIN SOLUTION
    q_end, out_dtype = q_start + q_rows.shape[-2], q_rows.dtype
    q_rows = q_rows.float()
    m = torch.full(q_rows.shape[:-1], float("-inf"), device=q_rows.device)  # running row max
    l = torch.zeros_like(m)  # running sum of exp(s - m)
    acc = torch.zeros_like(q_rows)  # running sum of exp(s - m) @ v
    # Causal: key tiles that start past this tile's last query are all masked, so never visit them.
    n_keys = q_end if is_causal else k.shape[-2]
    for k_start in range(0, n_keys, k_tile):
        k_end = min(k_start + k_tile, n_keys)
        s = (q_rows @ k[:, k_start:k_end].float().transpose(-1, -2)) * scale
        if is_causal and k_end - 1 > q_start:  # only tiles that cross the diagonal need the mask
            s = s.masked_fill(_above_diagonal(q_start, q_end, k_start, k_end, s.device), float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1))
        alpha = torch.exp(m - m_new)  # rescales what was summed against the old maximum
        p = torch.exp(s - m_new[..., None])
        l = alpha * l + p.sum(dim=-1)
        acc = alpha[..., None] * acc + p @ v[:, k_start:k_end].float()
        m = m_new
    return (acc / l[..., None]).to(out_dtype), m + torch.log(l)
    ### END SOLUTION


def flash_backward_pytorch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                           do: torch.Tensor, is_causal: bool = False, q_tile: int = 32,
                           k_tile: int = 32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashAttention-2 backward by recomputation: returns (dq, dk, dv) in the dtypes of q, k, v.

    o and do are (..., n_queries, d), lse is (..., n_queries) as returned by the forward. With
    D = rowsum(o * do), each score tile is recomputed as P = exp(S - lse), and then
    dV += Pᵀ dO, dP = dO Vᵀ, dS = P * (dP - D), dQ += dS K / sqrt(d), dK += dSᵀ Q / sqrt(d).

    Handout: §6 The backward by recomputation
    """
    ### BEGIN SOLUTION
    check_attention_inputs(q, k, v, is_causal)
    _check_tiles(q_tile, k_tile)
    if o.shape != q.shape or do.shape != q.shape or lse.shape != q.shape[:-1]:
        raise ValueError(f"o and do must have q's shape {tuple(q.shape)} and lse {tuple(q.shape[:-1])}, got "
                         f"{tuple(o.shape)}, {tuple(do.shape)} and {tuple(lse.shape)}")
    (n_queries, head_dim), n_keys = q.shape[-2:], k.shape[-2]
    q3, o3, do3 = (x.reshape(-1, n_queries, head_dim).float() for x in (q, o, do))
    k3, v3 = (x.reshape(-1, n_keys, head_dim).float() for x in (k, v))
    lse3 = lse.reshape(-1, n_queries).float()
    delta = (o3 * do3).sum(dim=-1)  # D_i = sum_d o_id * do_id, one number per query row
    dq, dk, dv = torch.zeros_like(q3), torch.empty_like(k3), torch.empty_like(v3)
    for k_start in range(0, n_keys, k_tile):
        cols = slice(k_start, min(k_start + k_tile, n_keys))
        dk[:, cols], dv[:, cols] = _backward_key_tile(q3, k3[:, cols], v3[:, cols], do3, lse3, delta, dq,
                                                      k_start, 1 / math.sqrt(head_dim), is_causal, q_tile)
    return dq.to(q.dtype).reshape(q.shape), dk.to(k.dtype).reshape(k.shape), dv.to(v.dtype).reshape(v.shape)
    ### END SOLUTION


def _backward_key_tile(q, k_cols, v_cols, do, lse, delta, dq, k_start: int, scale: float, is_causal: bool,
                       q_tile: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(dk, dv) of the key rows k_start... (k_cols is (B, cols, d)); adds their share of dq into dq.

    Handout: §6 The backward by recomputation
    """
    ### BEGIN SOLUTION
    k_end = k_start + k_cols.shape[-2]
    dk, dv = torch.zeros_like(k_cols), torch.zeros_like(v_cols)
    # Causal: queries before k_start see none of these keys, so their tiles are skipped.
    for q_start in range(k_start if is_causal else 0, q.shape[-2], q_tile):
        rows = slice(q_start, min(q_start + q_tile, q.shape[-2]))
        s = (q[:, rows] @ k_cols.transpose(-1, -2)) * scale
        if is_causal and k_end - 1 > q_start:
            s = s.masked_fill(_above_diagonal(q_start, rows.stop, k_start, k_end, s.device), float("-inf"))
        p = torch.exp(s - lse[:, rows, None])  # the forward's probabilities, recomputed
        dv += p.transpose(-1, -2) @ do[:, rows]
        dp = do[:, rows] @ v_cols.transpose(-1, -2)
        ds = p * (dp - delta[:, rows, None])
        dq[:, rows] += (ds @ k_cols) * scale
        dk += (ds.transpose(-1, -2) @ q[:, rows]) * scale
    return dk, dv
    ### END SOLUTION


class FlashAttentionPytorch(torch.autograd.Function):
    """`FlashAttentionPytorch.apply(q, k, v, is_causal=False)` -> o, differentiable in q, k and v.

    Saves q, k, v, o and lse for backward: lse is the only saved tensor of shape (..., n_queries),
    and nothing of n_queries x n_keys elements is kept.

    Handout: §6 The backward by recomputation
    """

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
        ### BEGIN SOLUTION
        o, lse = flash_forward_pytorch(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        return o
        ### END SOLUTION

    @staticmethod
    def backward(ctx, do: torch.Tensor):
        ### BEGIN SOLUTION
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_backward_pytorch(q, k, v, o, lse, do, ctx.is_causal)
        return dq, dk, dv, None
        ### END SOLUTION
