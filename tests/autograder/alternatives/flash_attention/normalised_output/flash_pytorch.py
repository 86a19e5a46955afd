"""Alternative FlashAttention-2 in PyTorch: a normalised running output and a running lse.

Instead of (m, l, acc), each query tile keeps lse (the logsumexp of the scores seen so far) and o
(the softmax output over those keys, already normalised). A new key tile with scores s updates them:
lse' = logaddexp(lse, logsumexp(s)) and o' = exp(lse - lse') o + exp(s - lse') v. Causal key tiles
are skipped whole: the loop stops at the first key tile that starts after the query tile's last row.
Leading dims are never flattened (einsum over `...`); the backward runs the query tiles outside.
"""

import math

import torch

from flash_attention.reference import check_attention_inputs

NEG_INF = float("-inf")


def _check_tiles(*tiles) -> None:
    if any(type(t) is not int or t <= 0 for t in tiles):
        raise ValueError(f"tiles must be positive ints, got {tiles}")


def _scores(q_rows, k_cols, qs: int, ks: int, scale: float, is_causal: bool) -> torch.Tensor:
    """Scaled scores of one tile, with keys after the query masked when the tile crosses the diagonal."""
    s = torch.einsum("...id,...jd->...ij", q_rows, k_cols) * scale
    qe, ke = qs + q_rows.shape[-2], ks + k_cols.shape[-2]
    if is_causal and ke - 1 > qs:
        above = torch.arange(ks, ke, device=s.device)[None, :] > torch.arange(qs, qe, device=s.device)[:, None]
        s = s.masked_fill(above, NEG_INF)
    return s


def _key_tiles(n_keys: int, k_tile: int, q_end: int, is_causal: bool):
    for ks in range(0, n_keys, k_tile):
        if is_causal and ks >= q_end:
            return
        yield ks, min(ks + k_tile, n_keys)


def flash_forward_pytorch(q, k, v, is_causal=False, q_tile=32, k_tile=32):
    check_attention_inputs(q, k, v, is_causal)
    _check_tiles(q_tile, k_tile)
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1])
    outputs, lses = [], []
    for qs in range(0, n_queries, q_tile):
        qe = min(qs + q_tile, n_queries)
        q_rows = q[..., qs:qe, :].float()
        o = torch.zeros_like(q_rows)
        lse = torch.full(q_rows.shape[:-1], NEG_INF, device=q.device)
        for ks, ke in _key_tiles(n_keys, k_tile, qe, is_causal):
            s = _scores(q_rows, k[..., ks:ke, :].float(), qs, ks, scale, is_causal)
            shift = torch.maximum(lse, s.amax(dim=-1))
            new_lse = shift + torch.log(torch.exp(lse - shift) + torch.exp(s - shift[..., None]).sum(dim=-1))
            p = torch.exp(s - new_lse[..., None])
            pv = torch.einsum("...ij,...jd->...id", p, v[..., ks:ke, :].float())
            o = torch.exp(lse - new_lse)[..., None] * o + pv
            lse = new_lse
        outputs.append(o.to(q.dtype))
        lses.append(lse)
    return torch.cat(outputs, dim=-2), torch.cat(lses, dim=-1)


def flash_backward_pytorch(q, k, v, o, lse, do, is_causal=False, q_tile=32, k_tile=32):
    check_attention_inputs(q, k, v, is_causal)
    _check_tiles(q_tile, k_tile)
    if o.shape != q.shape or do.shape != q.shape or lse.shape != q.shape[:-1]:
        raise ValueError("o and do must have q's shape and lse q.shape[:-1]")
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1])
    qf, kf, vf, dof, lsef = (x.float() for x in (q, k, v, do, lse))
    delta = (o.float() * dof).sum(dim=-1)
    dq, dk, dv = torch.zeros_like(qf), torch.zeros_like(kf), torch.zeros_like(vf)
    for qs in range(0, n_queries, q_tile):
        qe = min(qs + q_tile, n_queries)
        q_rows, do_rows = qf[..., qs:qe, :], dof[..., qs:qe, :]
        for ks, ke in _key_tiles(n_keys, k_tile, qe, is_causal):
            s = _scores(q_rows, kf[..., ks:ke, :], qs, ks, scale, is_causal)
            p = torch.exp(s - lsef[..., qs:qe, None])
            dv[..., ks:ke, :] += torch.einsum("...ij,...id->...jd", p, do_rows)
            dp = torch.einsum("...id,...jd->...ij", do_rows, vf[..., ks:ke, :])
            ds = p * (dp - delta[..., qs:qe, None]) * scale
            dq[..., qs:qe, :] += torch.einsum("...ij,...jd->...id", ds, kf[..., ks:ke, :])
            dk[..., ks:ke, :] += torch.einsum("...ij,...id->...jd", ds, q_rows)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class FlashAttentionPytorch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        o, lse = flash_forward_pytorch(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        return (*flash_backward_pytorch(q, k, v, o, lse, do, ctx.is_causal), None)
