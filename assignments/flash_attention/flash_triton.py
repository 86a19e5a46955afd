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
    raise NotImplementedError('_load_rows in flash_attention/flash_triton.py is not implemented yet: write it (handout §8 The Triton forward kernel)')


@triton.jit
def _store_rows(base, tile, rows, n_rows, stride_row, stride_col, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr):
    """Store tile into base[rows, :HEAD_DIM] in base's dtype, skipping rows >= n_rows and padded columns.

    Handout: §8 The Triton forward kernel
    """
    raise NotImplementedError('_store_rows in flash_attention/flash_triton.py is not implemented yet: write it (handout §8 The Triton forward kernel)')


@triton.jit
def _fwd_key_loop(acc, l, m, q, K, V, rows, start, end, n_keys, stride_kn, stride_kd, stride_vn, stride_vd,
                  qk_scale, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, K_TILE: tl.constexpr,
                  ON_DIAGONAL: tl.constexpr, DOT_FP32: tl.constexpr):
    """The online softmax over the key tiles [start, end) for one query tile; returns (acc, l, m).

    ON_DIAGONAL: the tiles cross the diagonal, so mask key j > query i; otherwise mask keys >= n_keys.

    Handout: §8 The Triton forward kernel
    """
    raise NotImplementedError('_fwd_key_loop in flash_attention/flash_triton.py is not implemented yet: write it (handout §8 The Triton forward kernel)')


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
    raise NotImplementedError('_flash_fwd_kernel in flash_attention/flash_triton.py is not implemented yet: write it (handout §8 The Triton forward kernel)')


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
    raise NotImplementedError('flash_forward_triton in flash_attention/flash_triton.py is not implemented yet: write it (handout §8 The Triton forward kernel)')


@triton.jit
def _flash_bwd_preprocess_kernel(O, DO, DELTA, stride_ob, stride_on, stride_od, stride_dob, stride_don, stride_dod,
                                 n_queries, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, Q_TILE: tl.constexpr):
    """D = rowsum(O * dO) in fp32 for one query tile of one (batch, head); grid (cdiv(Nq, Q_TILE), B).

    Handout: §9 The Triton backward kernels
    """
    raise NotImplementedError('_flash_bwd_preprocess_kernel in flash_attention/flash_triton.py is not implemented yet: write it (handout §9 The Triton backward kernels)')


@triton.jit
def _dkdv_query_loop(dk, dv, k, v, Q, DO, LSE, DELTA, keys, start, end, n_queries, stride_qn, stride_qd,
                     stride_don, stride_dod, qk_scale, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr,
                     Q_TILE: tl.constexpr, ON_DIAGONAL: tl.constexpr, DOT_FP32: tl.constexpr):
    """Add the query tiles [start, end) into one key tile's dk and dv (both (K_TILE, D_PAD) fp32).

    Works with transposed tiles (keys x queries) so that dv += Pᵀ dO and dk += dSᵀ Q are plain dots.

    Handout: §9 The Triton backward kernels
    """
    raise NotImplementedError('_dkdv_query_loop in flash_attention/flash_triton.py is not implemented yet: write it (handout §9 The Triton backward kernels)')


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
    raise NotImplementedError('_flash_bwd_dkdv_kernel in flash_attention/flash_triton.py is not implemented yet: write it (handout §9 The Triton backward kernels)')


@triton.jit
def _dq_key_loop(dq, q, do, lse, delta, K, V, rows, start, end, n_keys, stride_kn, stride_kd, stride_vn,
                 stride_vd, qk_scale, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, K_TILE: tl.constexpr,
                 ON_DIAGONAL: tl.constexpr, DOT_FP32: tl.constexpr):
    """Add the key tiles [start, end) into one query tile's dq ((Q_TILE, D_PAD) fp32).

    Handout: §9 The Triton backward kernels
    """
    raise NotImplementedError('_dq_key_loop in flash_attention/flash_triton.py is not implemented yet: write it (handout §9 The Triton backward kernels)')


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
    raise NotImplementedError('_flash_bwd_dq_kernel in flash_attention/flash_triton.py is not implemented yet: write it (handout §9 The Triton backward kernels)')


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
    raise NotImplementedError('flash_backward_triton in flash_attention/flash_triton.py is not implemented yet: write it (handout §9 The Triton backward kernels)')


class FlashAttentionTriton(torch.autograd.Function):
    """`FlashAttentionTriton.apply(q, k, v, is_causal=False)` -> o, with the Triton forward and backward.

    Saves q, k, v, o and lse for backward, as FlashAttentionPytorch does.

    Handout: §9 The Triton backward kernels
    """

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
        raise NotImplementedError('FlashAttentionTriton.forward in flash_attention/flash_triton.py is not implemented yet: write it (handout §9 The Triton backward kernels)')

    @staticmethod
    def backward(ctx, do: torch.Tensor):
        raise NotImplementedError('FlashAttentionTriton.backward in flash_attention/flash_triton.py is not implemented yet: write it (handout §9 The Triton backward kernels)')
