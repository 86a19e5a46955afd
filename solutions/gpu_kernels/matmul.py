"""A tiled matmul with grouped program ids and a fused bias + activation epilogue (handout §4).

C = activation(A @ B + bias), A (M, K), B (K, N), bias (N,). Each program computes one
BLOCK_M x BLOCK_N tile of C: it walks K in BLOCK_K steps, loading a tile of A and a tile of B
(masked past M, N and K: masked values read as 0 and add nothing) and accumulating tl.dot in fp32.
The epilogue (bias, then the activation) runs on the fp32 accumulator in registers, and the tile
is stored once, in the inputs' dtype: the unfused sequence would write C, read it back to add the
bias, write it, read it again for the activation and write it a third time.

Grouped program ids: program pid does not take tile (pid // tiles_n, pid % tiles_n) (row-major
order, where consecutive programs sweep a whole row of tiles, reading all of B each row) but walks
GROUP_M rows of tiles column by column. Programs that run at the same time then share a few
column tiles of B and a few row tiles of A, which stay in the L2 cache instead of being fetched
from HBM again.
"""

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


# GPU choices: the keys _gpu_config must return, tile sizes first (the kernel's constexprs), then the launch options.
GPU_CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")


def _tiles(dtype: torch.dtype) -> dict:
    """The keyword arguments of the kernel launch for inputs of `dtype` on this device: BLOCK_M, BLOCK_N,
    BLOCK_K and GROUP_M, and on a GPU the launch options num_warps and num_stages too. Under the
    interpreter 32 x 32 x 32 tiles (numpy does the work; small tiles keep the masked tests cheap, and
    warps and stages mean nothing there); on a GPU your _gpu_config(dtype), checked (§4)."""
    if interpreted():
        return dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4)
    config = _gpu_config(dtype)
    if not isinstance(config, dict) or sorted(config) != sorted(GPU_CONFIG_KEYS):
        raise ValueError(f"_gpu_config in gpu_kernels/matmul.py must return a dict of exactly the keys "
                         f"{', '.join(GPU_CONFIG_KEYS)}, got {config!r} (handout §4)")
    for name, value in config.items():
        least = 16 if name.startswith("BLOCK") else 1
        if type(value) is not int or value < least or (name != "num_stages" and value & (value - 1)):
            kind = "an int >= 1" if name == "num_stages" else f"a power of two >= {least}"
            raise ValueError(f"_gpu_config in gpu_kernels/matmul.py: {name} must be {kind}, got {value!r} "
                             "(handout §4)")
    return config


def _gpu_config(dtype: torch.dtype) -> dict:
    """Your choice for inputs of `dtype` on a GPU: a dict of the tile sizes BLOCK_M, BLOCK_N, BLOCK_K and
    GROUP_M (the kernel's constexprs) and the launch options num_warps (32 threads each) and num_stages
    (the K steps of A and B tiles the software pipeliner keeps in shared memory). §4 says what bounds
    them; the build check (§A.4) builds them for the course GPU, the GPU speed tests time them, and T9
    asks you to justify them. Called on a GPU only (and by the build check, as on a GPU).

    Handout: §4 A tiled matmul with a fused epilogue
    """
    ### BEGIN SOLUTION
    # fp32: an IEEE dot, no tensor cores: 64 x 64 x 32 tiles, 32 accumulator values per thread at 4 warps,
    # 3 stages of 16 KiB. bf16/fp16: 128 x 128 x 64 tiles on the tensor cores (each loaded element used
    # 128 times; 1024 programs at 4096³, 8 waves on 132 SMs), at 8 warps (the 128 x 128 fp32 accumulator
    # is 64 registers per thread, and Triton 3.7.1 builds the kernel with 112 registers, 144 with the
    # epilogue; at 4 warps the accumulator is 128 per thread and the kernel takes 210, 255 with the
    # epilogue, the most a thread may have) and 3 stages of 32 KiB (96 KiB: within an A100's 163 KiB and
    # an H100's 227 KiB, so one config builds for both).
    if dtype == torch.float32:
        return dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=3)
    return dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)
    ### END SOLUTION


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


def matmul_triton(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None,
                  activation: str | None = None) -> torch.Tensor:
    """activation(a @ b + bias) by one Triton kernel: a (M, K), b (K, N), bias (N,) or None, activation
    None, "gelu" (tanh approximation) or "relu".

    Any M, N, K >= 0 and strides; float32, bfloat16 or float16 (a, b and bias alike), accumulated in
    float32; returns a new dense (M, N) tensor in the inputs' dtype. TypeError or ValueError naming the
    problem for anything else.

    Handout: §4 A tiled matmul with a fused epilogue
    """
    ### BEGIN SOLUTION
    check_matmul_inputs(a, b, bias, activation)
    require_triton()
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c

    tiles = _tiles(a.dtype)
    grid = (triton.cdiv(M, tiles["BLOCK_M"]) * triton.cdiv(N, tiles["BLOCK_N"]),)
    _matmul_kernel[grid](a, b, c, c if bias is None else bias, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                         HAS_BIAS=bias is not None, ACTIVATION=activation or "none", **tiles,
                         DOT_FP32=interpreted() or a.dtype == torch.float32)
    return c
    ### END SOLUTION
