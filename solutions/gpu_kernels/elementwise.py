"""GeLU as one elementwise Triton kernel (handout §2).

Each program owns BLOCK consecutive elements of the flattened tensor and masks the ragged last
block. Inputs of any shape and strides are made dense first (a no-op when they already are): the
kernel then reads each element once and writes each output element once, which is all an
elementwise op can do, so its speed is the memory bandwidth.

The same code runs compiled on a GPU (CUDA tensors) and interpreted on a CPU (CPU tensors under
TRITON_INTERPRET=1, which importing `kernels` sets when there is no GPU).
"""

import kernels  # noqa: F401  (select the interpreter before Triton is imported)
import torch

try:
    import triton
    import triton.language as tl

    _TRITON_MISSING = None
except ImportError as exc:  # Triton ships Linux wheels only: on macOS and Windows it cannot be installed

    class _NoTriton:
        """Stands in for triton and triton.language so this module imports without Triton."""

        constexpr = None

        @staticmethod
        def jit(fn):
            return fn

    triton = tl = _NoTriton()
    _TRITON_MISSING = f"triton cannot be imported here ({exc}): its wheels exist for Linux only"

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
BLOCK = 1024  # elements per program: 4 warps of 32 threads, 8 elements each (16 bytes in bf16: one 128-bit load, §2)


def check_float_tensor(name: str, x) -> None:
    """TypeError unless x is a torch.Tensor of float32, bfloat16 or float16."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in DTYPES:
        raise TypeError(f"{name} must be float32, bfloat16 or float16, got {x.dtype}; convert it with "
                        f"{name}.float() first")


def require_triton() -> None:
    if _TRITON_MISSING is not None:
        raise RuntimeError(f"{_TRITON_MISSING}. The Triton kernels need Linux (or the course container).")


@triton.jit
def gelu_tanh(x):
    """GeLU, tanh approximation, in x's (fp32) precision: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))).

    tanh is written out with tl.exp (Triton has no portable tanh: libdevice's is GPU-only), in a form that
    cannot overflow however large |x| is (handout §2).

    Handout: §2 GeLU, an elementwise kernel
    """
    ### BEGIN SOLUTION
    # sign(a) (1 - e) / (1 + e) with e = exp(-2|a|): e is at most 1, so nothing overflows.
    a = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2/pi) (x + 0.044715 x³)
    e = tl.exp(-2.0 * tl.abs(a))
    tanh = tl.where(a < 0, -1.0, 1.0) * (1.0 - e) / (1.0 + e)
    return 0.5 * x * (1.0 + tanh)
    ### END SOLUTION


@triton.jit
def _gelu_tanh_kernel(X, Y, n, BLOCK: tl.constexpr):
    """One program: GeLU of the elements [pid * BLOCK, pid * BLOCK + BLOCK) of X into Y, past n masked.

    Handout: §2 GeLU, an elementwise kernel
    """
    ### BEGIN SOLUTION
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # int64: tensors past 2³¹ elements
    mask = offsets < n
    x = tl.load(X + offsets, mask=mask).to(tl.float32)
    tl.store(Y + offsets, gelu_tanh(x).to(Y.dtype.element_ty), mask=mask)
    ### END SOLUTION


def gelu_triton(x: torch.Tensor) -> torch.Tensor:
    """GeLU with the tanh approximation (what F.gelu(x, approximate="tanh") computes), by one Triton kernel.

    Any shape and strides; float32, bfloat16 or float16, computed in float32; returns a new dense tensor of
    x's shape and dtype. TypeError for anything else.

    Handout: §2 GeLU, an elementwise kernel
    """
    ### BEGIN SOLUTION
    check_float_tensor("x", x)
    require_triton()
    dense = x.contiguous()  # one read of a strided x into dense order; a no-op when x is dense
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = dense.numel()
    if n:
        _gelu_tanh_kernel[(triton.cdiv(n, BLOCK),)](dense, y, n, BLOCK=BLOCK)
    return y
    ### END SOLUTION
