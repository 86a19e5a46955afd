"""FlashAttention-2 in Triton: one forward kernel, three backward kernels, no atomics.

The same code runs compiled on a GPU (CUDA tensors) and interpreted on a CPU (CPU tensors, under
TRITON_INTERPRET=1, which importing `kernels` sets when there is no GPU).

Layout: every tensor is flattened to (B, seq, d), B = the product of the leading dims, and each
kernel gets a 2-D grid (tiles along the sequence, B). Pointers are plain base + row * stride +
col * stride arithmetic with masks: rows past the end of the sequence and head-dim columns past d
(d is padded to a power of two, D_PAD) read as 0 and are never stored.

Scores are kept in log2 units: the kernels multiply q kᵀ by qk_scale = log2(e) / sqrt(d) and use
exp2, which a GPU computes in one instruction (exp(x) = exp2(x * log2 e)). The lse they store is
converted back to the natural log.

Portability rules (handout §7 Triton on a laptop and on a GPU): no block pointers (Triton 3.6 and
the locked 3.7.1 have them; they raise in Triton 3.9), no driver queries at import, autotune only on a GPU, fp32 dots with
input_precision="ieee" where fp32 is compared, and bf16/fp16 upcast to fp32 before tl.dot under
the interpreter (its bf16 dot is silently wrong).
"""

import math

import kernels  # noqa: F401  (select the interpreter before Triton is imported)
import torch
from kernels.device import interpreted

from flash_attention.reference import check_attention_inputs

try:
    import triton
    import triton.language as tl

    _TRITON_MISSING = None
except ImportError as exc:  # Triton ships Linux wheels only: on macOS and Windows it cannot be installed

    class _NoTriton:
        """Stands in for triton and triton.language so this module imports without Triton."""

        @staticmethod
        def constexpr(value=None):
            return value

        @staticmethod
        def jit(fn):
            return fn

    triton = tl = _NoTriton()
    _TRITON_MISSING = f"triton cannot be imported here ({exc}): its wheels exist for Linux only"

# Constants that kernel code reads are tl.constexpr: a GPU build refuses any other global in a @triton.jit
# function ("Cannot access global variable"), and `make test` does too (handout §7). Host code reads the
# number as LOG2E.value.
LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) = exp2(x * LOG2E)
LN2 = tl.constexpr(0.6931471805599453)  # ln(2) = 1 / LOG2E: from log2 back to natural-log units


def _require_triton() -> None:
    if _TRITON_MISSING is not None:
        raise RuntimeError(f"{_TRITON_MISSING}. The Triton FlashAttention needs Linux (or the course container); "
                           "the PyTorch parts (flash_pytorch.py) work everywhere.")


def _check_tile(name: str, tile: int) -> None:
    if type(tile) is not int or tile < 16 or tile & (tile - 1):
        raise ValueError(f"{name} must be a power of two >= 16 (tl.arange and tl.dot need it), got {tile!r}")


def _padded_head_dim(head_dim: int) -> int:
    """The head dim rounded up to a power of two (at least 16, tl.dot's smallest size)."""
    return max(16, 1 << (head_dim - 1).bit_length())


def _dot_in_fp32(x: torch.Tensor) -> bool:
    """Upcast tl.dot's inputs to fp32? Always under the interpreter (its bf16 dot is wrong), and for
    fp32 inputs on a GPU (so the dot is IEEE fp32, not TF32); bf16/fp16 on a GPU go to the tensor cores."""
    return interpreted() or x.dtype == torch.float32


def _autotune_on_gpu(kernel):
    """On a GPU, let Triton time a few warp and pipeline-stage counts once per head dim, tile and mode.

    Multi-config autotuning needs a GPU (it times with do_bench), so under the interpreter the kernel
    is returned as is. Tile sizes are the caller's arguments and are never tuned here. The grader's GPU
    worker launches the first config of the list only (handout §10): put first the one you would choose.
    """
    if _TRITON_MISSING is not None or interpreted():
        return kernel
    configs = [triton.Config({}, num_warps=w, num_stages=s) for w in (4, 8) for s in (2, 3, 4)]
    return triton.autotune(configs=configs, key=["HEAD_DIM", "Q_TILE", "K_TILE", "IS_CAUSAL", "DOT_FP32"])(kernel)


@triton.jit
def _dot(a, b, FP32: tl.constexpr):
    """a @ b accumulated in fp32; FP32: upcast both and multiply in IEEE fp32 (see _dot_in_fp32)."""
    if FP32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def _load_rows(base, rows, n_rows, stride_row, stride_col, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr):
    """The (len(rows), D_PAD) tile base[rows, :]; rows >= n_rows and columns >= HEAD_DIM read as 0.

    Handout: §8 The Triton forward kernel
    """
    ### BEGIN SOLUTION
    cols = tl.arange(0, D_PAD)
    ptrs = base + rows[:, None] * stride_row + cols[None, :] * stride_col
    if HEAD_DIM == D_PAD:  # no padded columns: mask the rows only
        mask = rows[:, None] < n_rows
    else:
        mask = (rows[:, None] < n_rows) & (cols[None, :] < HEAD_DIM)
    return tl.load(ptrs, mask=mask, other=0.0)
    ### END SOLUTION


@triton.jit
def _store_rows(base, tile, rows, n_rows, stride_row, stride_col, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr):
    """Store tile into base[rows, :HEAD_DIM] in base's dtype, skipping rows >= n_rows and padded columns.

    Handout: §8 The Triton forward kernel
    """
    ### BEGIN SOLUTION
    cols = tl.arange(0, D_PAD)
    ptrs = base + rows[:, None] * stride_row + cols[None, :] * stride_col
    mask = (rows[:, None] < n_rows) & (cols[None, :] < HEAD_DIM)
    tl.store(ptrs, tile.to(base.dtype.element_ty), mask=mask)
    ### END SOLUTION


@triton.jit
def _fwd_key_loop(acc, l, m, q, K, V, rows, start, end, n_keys, stride_kn, stride_kd, stride_vn, stride_vd,
                  qk_scale, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, K_TILE: tl.constexpr,
                  ON_DIAGONAL: tl.constexpr, DOT_FP32: tl.constexpr):
    """The online softmax over the key tiles [start, end) for one query tile; returns (acc, l, m).

    ON_DIAGONAL: the tiles cross the diagonal, so mask key j > query i; otherwise mask keys >= n_keys.

    Handout: §8 The Triton forward kernel
    """
    ### BEGIN SOLUTION
    for k_start in range(start, end, K_TILE):
        k_start = tl.multiple_of(k_start, K_TILE)
        keys = k_start + tl.arange(0, K_TILE)
        k = _load_rows(K, keys, n_keys, stride_kn, stride_kd, HEAD_DIM, D_PAD)
        v = _load_rows(V, keys, n_keys, stride_vn, stride_vd, HEAD_DIM, D_PAD)
        s = _dot(q, tl.trans(k), DOT_FP32) * qk_scale  # (Q_TILE, K_TILE) scores in log2 units
        if ON_DIAGONAL:
            s = tl.where(rows[:, None] >= keys[None, :], s, float("-inf"))
        else:
            s = tl.where(keys[None, :] < n_keys, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)  # rescales the sums made against the old row maximum
        p = tl.exp2(s - m_new[:, None])
        l = l * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, DOT_FP32)
        m = m_new
    return acc, l, m
    ### END SOLUTION


@_autotune_on_gpu
@triton.jit
def _flash_fwd_kernel(Q, K, V, O, LSE,
                      stride_qb, stride_qn, stride_qd, stride_kb, stride_kn, stride_kd,
                      stride_vb, stride_vn, stride_vd, stride_ob, stride_on, stride_od,
                      n_queries, n_keys, qk_scale,
                      HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, Q_TILE: tl.constexpr, K_TILE: tl.constexpr,
                      IS_CAUSAL: tl.constexpr, DOT_FP32: tl.constexpr):
    """One program: the output rows and lse of one query tile of one (batch, head).

    Grid (cdiv(n_queries, Q_TILE), B). Causal: key tiles wholly below the diagonal run unmasked,
    the tiles that cross it run masked, and the tiles above it are never loaded.

    Handout: §8 The Triton forward kernel
    """
    ### BEGIN SOLUTION
    tile = tl.program_id(0)
    if IS_CAUSAL:  # the last query tiles have the most keys to visit: start them first
        tile = tl.num_programs(0) - 1 - tile
    batch = tl.program_id(1).to(tl.int64)
    q_start = tile * Q_TILE
    rows = q_start + tl.arange(0, Q_TILE)
    q = _load_rows(Q + batch * stride_qb, rows, n_queries, stride_qn, stride_qd, HEAD_DIM, D_PAD)
    K += batch * stride_kb
    V += batch * stride_vb
    m = tl.full([Q_TILE], float("-inf"), dtype=tl.float32)
    l = tl.zeros([Q_TILE], dtype=tl.float32)
    acc = tl.zeros([Q_TILE, D_PAD], dtype=tl.float32)
    if IS_CAUSAL:
        below = (q_start // K_TILE) * K_TILE  # key tiles [0, below) end before this tile's first query
        acc, l, m = _fwd_key_loop(acc, l, m, q, K, V, rows, 0, below, n_keys, stride_kn, stride_kd,
                                  stride_vn, stride_vd, qk_scale, HEAD_DIM, D_PAD, K_TILE, False, DOT_FP32)
        acc, l, m = _fwd_key_loop(acc, l, m, q, K, V, rows, below, tl.minimum(q_start + Q_TILE, n_keys), n_keys,
                                  stride_kn, stride_kd, stride_vn, stride_vd, qk_scale, HEAD_DIM, D_PAD, K_TILE,
                                  True, DOT_FP32)
    else:
        acc, l, m = _fwd_key_loop(acc, l, m, q, K, V, rows, 0, n_keys, n_keys, stride_kn, stride_kd,
                                  stride_vn, stride_vd, qk_scale, HEAD_DIM, D_PAD, K_TILE, False, DOT_FP32)
    _store_rows(O + batch * stride_ob, acc / l[:, None], rows, n_queries, stride_on, stride_od, HEAD_DIM, D_PAD)
    lse = (m + tl.log2(l)) * LN2  # back from log2 to natural-log units
    tl.store(LSE + batch * n_queries + rows, lse, mask=rows < n_queries)
    ### END SOLUTION


def _tiles(x: torch.Tensor, q_tile: int | None, k_tile: int | None, gpu_default: tuple[int, int]) -> tuple[int, int]:
    """The caller's tile sizes, or this device's defaults (large tiles on a GPU, 32 interpreted)."""
    default = (32, 32) if interpreted() else gpu_default
    q_tile = default[0] if q_tile is None else q_tile
    k_tile = default[1] if k_tile is None else k_tile
    _check_tile("q_tile", q_tile)
    _check_tile("k_tile", k_tile)
    return q_tile, k_tile


def flash_forward_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
                         q_tile: int | None = None, k_tile: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention-2 forward in one Triton kernel: returns (o, lse) as flash_forward_pytorch does.

    Tiles must be powers of two >= 16; by default 128 x 64 on a GPU, 32 x 32 under the interpreter.

    Handout: §8 The Triton forward kernel
    """
    ### BEGIN SOLUTION
    check_attention_inputs(q, k, v, is_causal)
    q_tile, k_tile = _tiles(q, q_tile, k_tile, gpu_default=(128, 64))
    _require_triton()
    (n_queries, head_dim), n_keys = q.shape[-2:], k.shape[-2]
    q3, k3, v3 = (x.reshape(-1, x.shape[-2], head_dim) for x in (q, k, v))
    o = torch.empty_like(q3)
    lse = torch.empty(q3.shape[:-1], dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(n_queries, q_tile), q3.shape[0])
    _flash_fwd_kernel[grid](
        q3, k3, v3, o, lse, *q3.stride(), *k3.stride(), *v3.stride(), *o.stride(),
        n_queries, n_keys, LOG2E / math.sqrt(head_dim),
        HEAD_DIM=head_dim, D_PAD=_padded_head_dim(head_dim), Q_TILE=q_tile, K_TILE=k_tile,
        IS_CAUSAL=is_causal, DOT_FP32=_dot_in_fp32(q),
    )
    return o.reshape(q.shape), lse.reshape(q.shape[:-1])
    ### END SOLUTION


@triton.jit
def _flash_bwd_preprocess_kernel(O, DO, DELTA, stride_ob, stride_on, stride_od, stride_dob, stride_don, stride_dod,
                                 n_queries, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, Q_TILE: tl.constexpr):
    """D = rowsum(O * dO) in fp32 for one query tile of one (batch, head); grid (cdiv(Nq, Q_TILE), B).

    Handout: §9 The Triton backward kernels
    """
    ### BEGIN SOLUTION
    batch = tl.program_id(1).to(tl.int64)
    rows = tl.program_id(0) * Q_TILE + tl.arange(0, Q_TILE)
    o = _load_rows(O + batch * stride_ob, rows, n_queries, stride_on, stride_od, HEAD_DIM, D_PAD)
    do = _load_rows(DO + batch * stride_dob, rows, n_queries, stride_don, stride_dod, HEAD_DIM, D_PAD)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + batch * n_queries + rows, delta, mask=rows < n_queries)
    ### END SOLUTION


@triton.jit
def _dkdv_query_loop(dk, dv, k, v, Q, DO, LSE, DELTA, keys, start, end, n_queries, stride_qn, stride_qd,
                     stride_don, stride_dod, qk_scale, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr,
                     Q_TILE: tl.constexpr, ON_DIAGONAL: tl.constexpr, DOT_FP32: tl.constexpr):
    """Add the query tiles [start, end) into one key tile's dk and dv (both (K_TILE, D_PAD) fp32).

    Works with transposed tiles (keys x queries) so that dv += Pᵀ dO and dk += dSᵀ Q are plain dots.

    Handout: §9 The Triton backward kernels
    """
    ### BEGIN SOLUTION
    for q_start in range(start, end, Q_TILE):
        q_start = tl.multiple_of(q_start, Q_TILE)
        rows = q_start + tl.arange(0, Q_TILE)
        q = _load_rows(Q, rows, n_queries, stride_qn, stride_qd, HEAD_DIM, D_PAD)
        do = _load_rows(DO, rows, n_queries, stride_don, stride_dod, HEAD_DIM, D_PAD)
        # Rows past the end get lse = +inf, so their recomputed probabilities are exp2(-inf) = 0.
        lse = tl.load(LSE + rows, mask=rows < n_queries, other=float("inf")) * 1.4426950408889634
        delta = tl.load(DELTA + rows, mask=rows < n_queries, other=0.0)
        p_t = tl.exp2(_dot(k, tl.trans(q), DOT_FP32) * qk_scale - lse[None, :])  # Pᵀ, (K_TILE, Q_TILE)
        if ON_DIAGONAL:
            p_t = tl.where(rows[None, :] >= keys[:, None], p_t, 0.0)
        dv += _dot(p_t.to(do.dtype), do, DOT_FP32)
        dp_t = _dot(v, tl.trans(do), DOT_FP32)
        ds_t = p_t * (dp_t - delta[None, :])
        dk += _dot(ds_t.to(q.dtype), q, DOT_FP32)
    return dk, dv
    ### END SOLUTION


@_autotune_on_gpu
@triton.jit
def _flash_bwd_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV,
                           stride_qb, stride_qn, stride_qd, stride_kb, stride_kn, stride_kd,
                           stride_vb, stride_vn, stride_vd, stride_dob, stride_don, stride_dod,
                           n_queries, n_keys, qk_scale, sm_scale,
                           HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, Q_TILE: tl.constexpr, K_TILE: tl.constexpr,
                           IS_CAUSAL: tl.constexpr, DOT_FP32: tl.constexpr):
    """One program: dK and dV of one key tile of one (batch, head), looping over the query tiles.

    Grid (cdiv(n_keys, K_TILE), B); dk and dv (same strides as k and v) are written once, no atomics.

    Handout: §9 The Triton backward kernels
    """
    ### BEGIN SOLUTION
    batch = tl.program_id(1).to(tl.int64)
    k_start = tl.program_id(0) * K_TILE
    keys = k_start + tl.arange(0, K_TILE)
    k = _load_rows(K + batch * stride_kb, keys, n_keys, stride_kn, stride_kd, HEAD_DIM, D_PAD)
    v = _load_rows(V + batch * stride_vb, keys, n_keys, stride_vn, stride_vd, HEAD_DIM, D_PAD)
    Q += batch * stride_qb
    DO += batch * stride_dob
    LSE += batch * n_queries
    DELTA += batch * n_queries
    dk = tl.zeros([K_TILE, D_PAD], dtype=tl.float32)
    dv = tl.zeros([K_TILE, D_PAD], dtype=tl.float32)
    if IS_CAUSAL:
        first = (k_start // Q_TILE) * Q_TILE  # query tiles before it end before this tile's first key
        clear = tl.cdiv(k_start + K_TILE, Q_TILE) * Q_TILE  # from here on every query sees every key
        dk, dv = _dkdv_query_loop(dk, dv, k, v, Q, DO, LSE, DELTA, keys, first, tl.minimum(clear, n_queries),
                                  n_queries, stride_qn, stride_qd, stride_don, stride_dod, qk_scale,
                                  HEAD_DIM, D_PAD, Q_TILE, True, DOT_FP32)
        dk, dv = _dkdv_query_loop(dk, dv, k, v, Q, DO, LSE, DELTA, keys, clear, n_queries, n_queries,
                                  stride_qn, stride_qd, stride_don, stride_dod, qk_scale,
                                  HEAD_DIM, D_PAD, Q_TILE, False, DOT_FP32)
    else:
        dk, dv = _dkdv_query_loop(dk, dv, k, v, Q, DO, LSE, DELTA, keys, 0, n_queries, n_queries,
                                  stride_qn, stride_qd, stride_don, stride_dod, qk_scale,
                                  HEAD_DIM, D_PAD, Q_TILE, False, DOT_FP32)
    _store_rows(DK + batch * stride_kb, dk * sm_scale, keys, n_keys, stride_kn, stride_kd, HEAD_DIM, D_PAD)
    _store_rows(DV + batch * stride_vb, dv, keys, n_keys, stride_vn, stride_vd, HEAD_DIM, D_PAD)
    ### END SOLUTION


@triton.jit
def _dq_key_loop(dq, q, do, lse, delta, K, V, rows, start, end, n_keys, stride_kn, stride_kd, stride_vn,
                 stride_vd, qk_scale, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, K_TILE: tl.constexpr,
                 ON_DIAGONAL: tl.constexpr, DOT_FP32: tl.constexpr):
    """Add the key tiles [start, end) into one query tile's dq ((Q_TILE, D_PAD) fp32).

    Handout: §9 The Triton backward kernels
    """
    ### BEGIN SOLUTION
    for k_start in range(start, end, K_TILE):
        k_start = tl.multiple_of(k_start, K_TILE)
        keys = k_start + tl.arange(0, K_TILE)
        k = _load_rows(K, keys, n_keys, stride_kn, stride_kd, HEAD_DIM, D_PAD)
        v = _load_rows(V, keys, n_keys, stride_vn, stride_vd, HEAD_DIM, D_PAD)
        p = tl.exp2(_dot(q, tl.trans(k), DOT_FP32) * qk_scale - lse[:, None])
        if ON_DIAGONAL:
            p = tl.where(rows[:, None] >= keys[None, :], p, 0.0)
        else:
            p = tl.where(keys[None, :] < n_keys, p, 0.0)
        dp = _dot(do, tl.trans(v), DOT_FP32)
        ds = p * (dp - delta[:, None])
        dq += _dot(ds.to(k.dtype), k, DOT_FP32)
    return dq
    ### END SOLUTION


@_autotune_on_gpu
@triton.jit
def _flash_bwd_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ,
                         stride_qb, stride_qn, stride_qd, stride_kb, stride_kn, stride_kd,
                         stride_vb, stride_vn, stride_vd, stride_dob, stride_don, stride_dod,
                         n_queries, n_keys, qk_scale, sm_scale,
                         HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, Q_TILE: tl.constexpr, K_TILE: tl.constexpr,
                         IS_CAUSAL: tl.constexpr, DOT_FP32: tl.constexpr):
    """One program: dQ of one query tile of one (batch, head), looping over the key tiles.

    Grid (cdiv(n_queries, Q_TILE), B); dq (same strides as q) is written once, no atomics.

    Handout: §9 The Triton backward kernels
    """
    ### BEGIN SOLUTION
    tile = tl.program_id(0)
    if IS_CAUSAL:  # the last query tiles visit the most keys: start them first
        tile = tl.num_programs(0) - 1 - tile
    batch = tl.program_id(1).to(tl.int64)
    q_start = tile * Q_TILE
    rows = q_start + tl.arange(0, Q_TILE)
    q = _load_rows(Q + batch * stride_qb, rows, n_queries, stride_qn, stride_qd, HEAD_DIM, D_PAD)
    do = _load_rows(DO + batch * stride_dob, rows, n_queries, stride_don, stride_dod, HEAD_DIM, D_PAD)
    lse = tl.load(LSE + batch * n_queries + rows, mask=rows < n_queries, other=float("inf")) * 1.4426950408889634
    delta = tl.load(DELTA + batch * n_queries + rows, mask=rows < n_queries, other=0.0)
    K += batch * stride_kb
    V += batch * stride_vb
    dq = tl.zeros([Q_TILE, D_PAD], dtype=tl.float32)
    if IS_CAUSAL:
        below = (q_start // K_TILE) * K_TILE
        dq = _dq_key_loop(dq, q, do, lse, delta, K, V, rows, 0, below, n_keys, stride_kn, stride_kd,
                          stride_vn, stride_vd, qk_scale, HEAD_DIM, D_PAD, K_TILE, False, DOT_FP32)
        dq = _dq_key_loop(dq, q, do, lse, delta, K, V, rows, below, tl.minimum(q_start + Q_TILE, n_keys), n_keys,
                          stride_kn, stride_kd, stride_vn, stride_vd, qk_scale, HEAD_DIM, D_PAD, K_TILE, True,
                          DOT_FP32)
    else:
        dq = _dq_key_loop(dq, q, do, lse, delta, K, V, rows, 0, n_keys, n_keys, stride_kn, stride_kd,
                          stride_vn, stride_vd, qk_scale, HEAD_DIM, D_PAD, K_TILE, False, DOT_FP32)
    _store_rows(DQ + batch * stride_qb, dq * sm_scale, rows, n_queries, stride_qn, stride_qd, HEAD_DIM, D_PAD)
    ### END SOLUTION


def flash_backward_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                          do: torch.Tensor, is_causal: bool = False, q_tile: int | None = None,
                          k_tile: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashAttention-2 backward in three Triton kernels: returns (dq, dk, dv) like flash_backward_pytorch.

    A preprocess kernel computes D = rowsum(o * do); one kernel per key tile writes dK and dV; one
    kernel per query tile writes dQ. Each output element is written by exactly one program, so no
    atomics are needed (the price: dQ's kernel recomputes the score tiles the dK/dV kernel computed).
    Tile sizes given apply to both kernels; by default, on a GPU, the kernel's own (outer) tile is
    128 and the tile it loops over is 32; under the interpreter both are 32.

    Handout: §9 The Triton backward kernels
    """
    ### BEGIN SOLUTION
    check_attention_inputs(q, k, v, is_causal)
    if o.shape != q.shape or do.shape != q.shape or lse.shape != q.shape[:-1]:
        raise ValueError(f"o and do must have q's shape {tuple(q.shape)} and lse {tuple(q.shape[:-1])}, got "
                         f"{tuple(o.shape)}, {tuple(do.shape)} and {tuple(lse.shape)}")
    dkdv_tiles = _tiles(q, q_tile, k_tile, gpu_default=(32, 128))
    dq_tiles = _tiles(q, q_tile, k_tile, gpu_default=(128, 32))
    _require_triton()
    (n_queries, head_dim), n_keys = q.shape[-2:], k.shape[-2]
    # dq, dk, dv are written with the strides of q, k, v: make those dense (a no-op when they are).
    q3, o3, do3 = (x.reshape(-1, n_queries, head_dim).contiguous() for x in (q, o, do))
    k3, v3 = (x.reshape(-1, n_keys, head_dim).contiguous() for x in (k, v))
    lse3 = lse.reshape(-1, n_queries).float().contiguous()
    delta = torch.empty_like(lse3)
    dims = dict(HEAD_DIM=head_dim, D_PAD=_padded_head_dim(head_dim))
    batch = q3.shape[0]
    _flash_bwd_preprocess_kernel[(triton.cdiv(n_queries, dq_tiles[0]), batch)](
        o3, do3, delta, *o3.stride(), *do3.stride(), n_queries, Q_TILE=dq_tiles[0], **dims)
    dq, dk, dv = torch.empty_like(q3), torch.empty_like(k3), torch.empty_like(v3)
    strides = (*q3.stride(), *k3.stride(), *v3.stride(), *do3.stride())
    scales = (n_queries, n_keys, LOG2E / math.sqrt(head_dim), 1 / math.sqrt(head_dim))
    flags = dict(IS_CAUSAL=is_causal, DOT_FP32=_dot_in_fp32(q), **dims)
    _flash_bwd_dkdv_kernel[(triton.cdiv(n_keys, dkdv_tiles[1]), batch)](
        q3, k3, v3, do3, lse3, delta, dk, dv, *strides, *scales, Q_TILE=dkdv_tiles[0], K_TILE=dkdv_tiles[1], **flags)
    _flash_bwd_dq_kernel[(triton.cdiv(n_queries, dq_tiles[0]), batch)](
        q3, k3, v3, do3, lse3, delta, dq, *strides, *scales, Q_TILE=dq_tiles[0], K_TILE=dq_tiles[1], **flags)
    return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)
    ### END SOLUTION


class FlashAttentionTriton(torch.autograd.Function):
    """`FlashAttentionTriton.apply(q, k, v, is_causal=False)` -> o, with the Triton forward and backward.

    Saves q, k, v, o and lse for backward, as FlashAttentionPytorch does.

    Handout: §9 The Triton backward kernels
    """

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
        ### BEGIN SOLUTION
        o, lse = flash_forward_triton(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        return o
        ### END SOLUTION

    @staticmethod
    def backward(ctx, do: torch.Tensor):
        ### BEGIN SOLUTION
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_backward_triton(q, k, v, o, lse, do.contiguous(), ctx.is_causal)
        return dq, dk, dv, None
        ### END SOLUTION
