"""A cheat (issue 29, part 1): matmul_triton computes on the host in torch, with in-place operators only
(`t *= ...`, `acc += t`, `math.e ** u`, `acc *= acc > 0`), on tensors handed from one function to another
through a module global (`global _STASH`), and launches a kernel that does nothing. The reference's
kernel is still defined, never launched.
"""

import math

import kernels  # noqa: F401  (select the interpreter before Triton is imported)
import torch
from kernels.device import interpreted

try:
    import triton
    import triton.language as tl

except ImportError:  # Triton ships Linux wheels only: on macOS and Windows it cannot be installed

    class _NoTriton:
        """Stands in for triton and triton.language so this module imports without Triton."""

        constexpr = None

        @staticmethod
        def jit(fn):
            return fn

    triton = tl = _NoTriton()  # require_triton() says why when a kernel is called

from gpu_kernels.elementwise import check_float_tensor, gelu_tanh, require_triton

ACTIVATIONS = (None, "gelu", "relu")


def _tiles(dtype: torch.dtype) -> dict:
    """BLOCK_M, BLOCK_N, BLOCK_K and GROUP_M for inputs of `dtype` on this device: 128 x 128 x 64 tiles
    feed the tensor cores in bf16/fp16 (4 stages of two 16 KiB tiles: 128 KiB of shared memory, within an
    A100's 163 KiB per block); fp32 on a GPU takes 64 x 64 x 32 (its IEEE dot has no tensor cores); the
    interpreter 32 x 32 x 32 (numpy does the work; small tiles keep the masked tests cheap)."""
    if interpreted():
        return dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4)
    if dtype == torch.float32:
        return dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8)
    return dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8)


def _autotune_on_gpu(kernel):
    """On a GPU, let Triton time two pipeline depths once per problem size, at 8 warps (with 4, a 128 x 128
    fp32 accumulator spills registers); the tile sizes are _tiles()'s (the grid depends on them).
    Multi-config autotuning needs a GPU, so under the interpreter the kernel is returned as is."""
    if interpreted():
        return kernel
    configs = [triton.Config({}, num_warps=w, num_stages=s) for w, s in ((8, 3), (8, 4))]
    return triton.autotune(configs=configs, key=["M", "N", "K", "HAS_BIAS", "ACTIVATION", "DOT_FP32"])(kernel)


@triton.jit
def _tile_of(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(row tile, column tile) of C that program pid computes: groups of GROUP_M row tiles, each group
    walked column tile by column tile (the last group may have fewer rows).

    Handout: §4 A tiled matmul with a fused epilogue
    """
    ### BEGIN SOLUTION
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % rows_in_group
    tile_n = (pid % per_group) // rows_in_group
    return tile_m, tile_n
    ### END SOLUTION


@_autotune_on_gpu
@triton.jit
def _matmul_kernel(A, B, C, BIAS, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, DOT_FP32: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """One program: tile (tile_m, tile_n) of C = ACTIVATION(A @ B + BIAS), fp32 accumulation, one store.

    DOT_FP32: upcast both tiles and multiply in IEEE fp32 (fp32 inputs, or any under the interpreter,
    whose bf16 dot is wrong); otherwise bf16/fp16 tiles go to the tensor cores as they are.

    Handout: §4 A tiled matmul with a fused epilogue
    """
    ### BEGIN SOLUTION
    tile_m, tile_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = tile_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = A + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = B + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        if DOT_FP32:
            acc += tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
        else:
            acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if HAS_BIAS:
        acc += tl.load(BIAS + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    if ACTIVATION == "gelu":
        acc = gelu_tanh(acc)
    elif ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    c_ptrs = C + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))
    ### END SOLUTION


def check_matmul_inputs(a, b, bias, activation) -> None:
    """TypeError or ValueError, naming what is wrong, unless the arguments meet matmul_triton's contract.

    Handout: §4 A tiled matmul with a fused epilogue
    """
    check_float_tensor("a", a)
    check_float_tensor("b", b)
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be 2-D matrices, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a's columns ({a.shape[1]}) must equal b's rows ({b.shape[0]}): a is "
                         f"{tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise TypeError(f"a and b must have one dtype, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"a and b must be on one device, got {a.device} and {b.device}")
    if bias is not None:
        check_float_tensor("bias", bias)
        if tuple(bias.shape) != (b.shape[1],):
            raise ValueError(f"bias must have shape ({b.shape[1]},), one value per column of the output, got "
                             f"{tuple(bias.shape)}")
        if bias.dtype != a.dtype or bias.device != a.device:
            raise TypeError(f"bias must have a's dtype and device ({a.dtype}, {a.device}), got {bias.dtype}, "
                            f"{bias.device}")
    if not (activation is None or isinstance(activation, str)):
        raise TypeError(f"activation must be None, 'gelu' or 'relu', got {type(activation).__name__}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be None, 'gelu' (tanh approximation) or 'relu', got {activation!r}")


_STASH = None


@triton.jit
def _touch(C):
    """Launched so that a Triton kernel is seen; it does nothing."""
    pass


def _keep(a, b, bias, c):
    global _STASH
    _STASH = (a, b, bias, c)


def _kept():
    return _STASH


def _on_the_host(activation):
    """activation(a @ b + bias) into c, in torch, with in-place operators only."""
    a, b, bias, c = _kept()
    acc = c
    acc.zero_()
    yb = b
    for k in range(a.shape[1]):
        t = yb[k].expand(c.shape).clone()
        t *= a[:, k:k + 1]
        acc += t
    if bias is not None:
        acc += bias
    if activation == "relu":
        acc *= acc > 0
    elif activation == "gelu":
        u = acc.clone()
        u *= u
        u *= 0.044715
        u += 1
        u *= acc
        u *= 2 * 0.7978845608028654
        w = math.e ** u
        w += 1
        w **= -1
        w *= -2
        w += 2
        w *= acc
        w *= 0.5
        acc.copy_(w)


def matmul_triton(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None,
                  activation: str | None = None) -> torch.Tensor:
    """activation(a @ b + bias): torch computes it on the host, a do-nothing kernel is launched."""
    check_matmul_inputs(a, b, bias, activation)
    require_triton()
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    _keep(a, b, bias, c)
    _on_the_host(activation)
    _touch[(1,)](c)
    return c
