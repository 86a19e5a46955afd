"""Alternative FlashAttention-2 in Triton: natural-log exp, one masked key loop, and dQ by atomics.

Forward: one program per (query tile, batch); a single loop over the key tiles up to the diagonal
(causal) or the end, every tile masked with (key < n_keys) & (key <= query when causal). Backward: a
preprocess for D = rowsum(o * do), then one program per (key tile, batch) that owns dK and dV and
adds each query tile's share of dQ into a float32 buffer with tl.atomic_add.
"""

import math

import kernels  # noqa: F401  (select the interpreter before Triton is imported)
import torch
import triton
import triton.language as tl
from kernels.device import interpreted

from flash_attention.reference import check_attention_inputs


def _tile(name: str, tile, default: int) -> int:
    tile = default if tile is None else tile
    if type(tile) is not int or tile < 16 or tile & (tile - 1):
        raise ValueError(f"{name} must be a power of two >= 16, got {tile!r}")
    return tile


@triton.jit
def _dot(a, b, FP32: tl.constexpr):
    if FP32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def _tile_ptrs(base, rows, stride_row, stride_col, D_PAD: tl.constexpr):
    return base + rows[:, None] * stride_row + tl.arange(0, D_PAD)[None, :] * stride_col


@triton.jit
def _tile_mask(rows, n_rows, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr):
    return (rows[:, None] < n_rows) & (tl.arange(0, D_PAD)[None, :] < HEAD_DIM)


@triton.jit
def _fwd_kernel(Q, K, V, O, LSE, sqb, sqn, sqd, skb, skn, skd, svb, svn, svd, sob, son, sod, n_queries, n_keys,
                scale, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, Q_TILE: tl.constexpr, K_TILE: tl.constexpr,
                IS_CAUSAL: tl.constexpr, FP32: tl.constexpr):
    b = tl.program_id(1).to(tl.int64)
    rows = tl.program_id(0) * Q_TILE + tl.arange(0, Q_TILE)
    q = tl.load(_tile_ptrs(Q + b * sqb, rows, sqn, sqd, D_PAD), mask=_tile_mask(rows, n_queries, HEAD_DIM, D_PAD),
                other=0.0)
    m = tl.full([Q_TILE], float("-inf"), dtype=tl.float32)
    l = tl.zeros([Q_TILE], dtype=tl.float32)
    acc = tl.zeros([Q_TILE, D_PAD], dtype=tl.float32)
    end = n_keys
    if IS_CAUSAL:
        end = tl.minimum((tl.program_id(0) + 1) * Q_TILE, n_keys)
    for start in range(0, end, K_TILE):
        keys = start + tl.arange(0, K_TILE)
        kv_mask = _tile_mask(keys, n_keys, HEAD_DIM, D_PAD)
        k = tl.load(_tile_ptrs(K + b * skb, keys, skn, skd, D_PAD), mask=kv_mask, other=0.0)
        v = tl.load(_tile_ptrs(V + b * svb, keys, svn, svd, D_PAD), mask=kv_mask, other=0.0)
        visible = keys[None, :] < n_keys
        if IS_CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None])
        s = tl.where(visible, _dot(q, tl.trans(k), FP32) * scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        l = l * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, FP32)
        m = m_new
    tl.store(_tile_ptrs(O + b * sob, rows, son, sod, D_PAD), (acc / l[:, None]).to(O.dtype.element_ty),
             mask=_tile_mask(rows, n_queries, HEAD_DIM, D_PAD))
    tl.store(LSE + b * n_queries + rows, m + tl.log(l), mask=rows < n_queries)


@triton.jit
def _delta_kernel(O, DO, DELTA, sob, son, sod, n_queries, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr,
                  Q_TILE: tl.constexpr):
    b = tl.program_id(1).to(tl.int64)
    rows = tl.program_id(0) * Q_TILE + tl.arange(0, Q_TILE)
    mask = _tile_mask(rows, n_queries, HEAD_DIM, D_PAD)
    o = tl.load(_tile_ptrs(O + b * sob, rows, son, sod, D_PAD), mask=mask, other=0.0).to(tl.float32)
    do = tl.load(_tile_ptrs(DO + b * sob, rows, son, sod, D_PAD), mask=mask, other=0.0).to(tl.float32)
    tl.store(DELTA + b * n_queries + rows, tl.sum(o * do, 1), mask=rows < n_queries)


@triton.jit
def _bwd_kernel(Q, K, V, DO, LSE, DELTA, DQ, DK, DV, sqb, sqn, sqd, skb, skn, skd, n_queries, n_keys, scale,
                HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, Q_TILE: tl.constexpr, K_TILE: tl.constexpr,
                IS_CAUSAL: tl.constexpr, FP32: tl.constexpr):
    """q, o, do, dq share q's strides (sq*); k, v, dk, dv share k's (sk*): the host makes them dense."""
    b = tl.program_id(1).to(tl.int64)
    k_start = tl.program_id(0) * K_TILE
    keys = k_start + tl.arange(0, K_TILE)
    kv_mask = _tile_mask(keys, n_keys, HEAD_DIM, D_PAD)
    k = tl.load(_tile_ptrs(K + b * skb, keys, skn, skd, D_PAD), mask=kv_mask, other=0.0)
    v = tl.load(_tile_ptrs(V + b * skb, keys, skn, skd, D_PAD), mask=kv_mask, other=0.0)
    dk = tl.zeros([K_TILE, D_PAD], dtype=tl.float32)
    dv = tl.zeros([K_TILE, D_PAD], dtype=tl.float32)
    first = 0
    if IS_CAUSAL:
        first = (k_start // Q_TILE) * Q_TILE
    for start in range(first, n_queries, Q_TILE):
        rows = start + tl.arange(0, Q_TILE)
        q_mask = _tile_mask(rows, n_queries, HEAD_DIM, D_PAD)
        q = tl.load(_tile_ptrs(Q + b * sqb, rows, sqn, sqd, D_PAD), mask=q_mask, other=0.0)
        do = tl.load(_tile_ptrs(DO + b * sqb, rows, sqn, sqd, D_PAD), mask=q_mask, other=0.0)
        lse = tl.load(LSE + b * n_queries + rows, mask=rows < n_queries, other=float("inf"))
        delta = tl.load(DELTA + b * n_queries + rows, mask=rows < n_queries, other=0.0)
        p = tl.exp(_dot(q, tl.trans(k), FP32) * scale - lse[:, None])  # (Q_TILE, K_TILE)
        visible = keys[None, :] < n_keys
        if IS_CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None])
        p = tl.where(visible, p, 0.0)
        dv += _dot(tl.trans(p).to(do.dtype), do, FP32)
        ds = p * (_dot(do, tl.trans(v), FP32) - delta[:, None]) * scale
        dk += _dot(tl.trans(ds).to(q.dtype), q, FP32)
        tl.atomic_add(_tile_ptrs(DQ + b * sqb, rows, sqn, sqd, D_PAD), _dot(ds.to(k.dtype), k, FP32), mask=q_mask)
    tl.store(_tile_ptrs(DK + b * skb, keys, skn, skd, D_PAD), dk.to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(_tile_ptrs(DV + b * skb, keys, skn, skd, D_PAD), dv.to(DV.dtype.element_ty), mask=kv_mask)


def _setup(q: torch.Tensor) -> dict:
    head_dim = q.shape[-1]
    return dict(HEAD_DIM=head_dim, D_PAD=max(16, triton.next_power_of_2(head_dim)),
                FP32=interpreted() or q.dtype == torch.float32)


def flash_forward_triton(q, k, v, is_causal=False, q_tile=None, k_tile=None):
    check_attention_inputs(q, k, v, is_causal)
    q_tile = _tile("q_tile", q_tile, 64 if q.is_cuda else 32)
    k_tile = _tile("k_tile", k_tile, 64 if q.is_cuda else 32)
    (n_queries, head_dim), n_keys = q.shape[-2:], k.shape[-2]
    q3, k3, v3 = (x.reshape(-1, x.shape[-2], head_dim) for x in (q, k, v))
    o = torch.empty_like(q3)
    lse = torch.empty(q3.shape[:-1], dtype=torch.float32, device=q.device)
    _fwd_kernel[(triton.cdiv(n_queries, q_tile), q3.shape[0])](
        q3, k3, v3, o, lse, *q3.stride(), *k3.stride(), *v3.stride(), *o.stride(), n_queries, n_keys,
        1 / math.sqrt(head_dim), Q_TILE=q_tile, K_TILE=k_tile, IS_CAUSAL=is_causal, **_setup(q))
    return o.reshape(q.shape), lse.reshape(q.shape[:-1])


def flash_backward_triton(q, k, v, o, lse, do, is_causal=False, q_tile=None, k_tile=None):
    check_attention_inputs(q, k, v, is_causal)
    if o.shape != q.shape or do.shape != q.shape or lse.shape != q.shape[:-1]:
        raise ValueError("o and do must have q's shape and lse q.shape[:-1]")
    q_tile = _tile("q_tile", q_tile, 32)
    k_tile = _tile("k_tile", k_tile, 64 if q.is_cuda else 32)
    (n_queries, head_dim), n_keys = q.shape[-2:], k.shape[-2]
    q3, o3, do3 = (x.reshape(-1, n_queries, head_dim).contiguous() for x in (q, o, do))
    k3, v3 = (x.reshape(-1, n_keys, head_dim).contiguous() for x in (k, v))
    lse3 = lse.reshape(-1, n_queries).float().contiguous()
    batch, setup = q3.shape[0], _setup(q)
    delta = torch.empty_like(lse3)
    _delta_kernel[(triton.cdiv(n_queries, q_tile), batch)](o3, do3, delta, *o3.stride(), n_queries, Q_TILE=q_tile,
                                                          HEAD_DIM=setup["HEAD_DIM"], D_PAD=setup["D_PAD"])
    dq = torch.zeros(q3.shape, dtype=torch.float32, device=q.device)
    dk, dv = torch.empty_like(k3), torch.empty_like(v3)
    _bwd_kernel[(triton.cdiv(n_keys, k_tile), batch)](
        q3, k3, v3, do3, lse3, delta, dq, dk, dv, *q3.stride(), *k3.stride(), n_queries, n_keys,
        1 / math.sqrt(head_dim), Q_TILE=q_tile, K_TILE=k_tile, IS_CAUSAL=is_causal, **setup)
    return dq.to(q.dtype).reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)


class FlashAttentionTriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        o, lse = flash_forward_triton(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        return (*flash_backward_triton(q, k, v, o, lse, do.contiguous(), ctx.is_causal), None)
