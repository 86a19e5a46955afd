"""The lecture's demo Triton kernels, elementwise add and GeLU, with their FLOP and byte counts.

Each kernel is the smallest useful Triton program: a 1-D grid of programs, each owning BLOCK
consecutive elements, with a mask for the ragged last block. They run on CUDA tensors on a GPU and
on CPU tensors under the interpreter (TRITON_INTERPRET=1, set by `kernels` before Triton loads).
Importing this module needs the triton package (Linux wheels only).

The counts say why both are memory-bound: an elementwise op reads and writes every element once
and does a handful of FLOPs per element, so its arithmetic intensity (FLOPs per byte moved, the
`arithmetic_intensity` you write in resource_accounting, handout §4: GeLU 5.0 and add 1/6 in bf16) is far
below any GPU's ridge point (about 295 FLOP/byte for an H100 SXM in bf16: 989.4e12 FLOP/s over
3.35e12 B/s, NVIDIA's datasheet figures).
"""

from __future__ import annotations


import kernels  # noqa: F401  (select the interpreter before Triton is imported)
import torch
import triton
import triton.language as tl

BLOCK = 1024

# The resource-accounting lecture counts GeLU (tanh approximation) as 20 FLOPs per element;
# with 2 bytes read and 2 written per element in bf16 its intensity is 20 / 4 = 5 FLOP/byte.
GELU_FLOPS_PER_ELEMENT = 20
ADD_FLOPS_PER_ELEMENT = 1


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n  # the last program may run past the end
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def _gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    # gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), with tanh(a) = 1 - 2 / (exp(2a) + 1)
    # written out because tl has no portable tanh (libdevice's exists on GPUs only).
    a = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tanh = 1.0 - 2.0 / (tl.exp(2.0 * a) + 1.0)
    tl.store(out_ptr + offsets, (0.5 * x * (1.0 + tanh)).to(out_ptr.dtype.element_ty), mask=mask)


def _check_same(x: torch.Tensor, y: torch.Tensor) -> None:
    if x.shape != y.shape or x.dtype != y.dtype or x.device != y.device:
        raise ValueError(f"add needs tensors of one shape, dtype and device, got {tuple(x.shape)} {x.dtype} "
                         f"{x.device} and {tuple(y.shape)} {y.dtype} {y.device}")


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x + y elementwise, by a Triton kernel."""
    _check_same(x, y)
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    _add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GeLU with the tanh approximation (torch's `gelu(x, approximate="tanh")`), by a Triton kernel."""
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    _gelu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


def _check_count(num_elements: int, bytes_per_element: int = 1) -> None:
    if type(num_elements) is not int or num_elements < 0:
        raise ValueError(f"num_elements must be a non-negative int, got {num_elements!r}")
    if type(bytes_per_element) is not int or bytes_per_element <= 0:
        raise ValueError(f"bytes_per_element must be a positive int, got {bytes_per_element!r}")


def add_flops(num_elements: int) -> int:
    """One addition per output element."""
    _check_count(num_elements)
    return ADD_FLOPS_PER_ELEMENT * num_elements


def add_bytes(num_elements: int, bytes_per_element: int = 2) -> int:
    """Bytes moved to and from memory: read x and y, write the output."""
    _check_count(num_elements, bytes_per_element)
    return 3 * num_elements * bytes_per_element


def gelu_flops(num_elements: int) -> int:
    """20 FLOPs per element, the lecture's count for the tanh approximation."""
    _check_count(num_elements)
    return GELU_FLOPS_PER_ELEMENT * num_elements


def gelu_bytes(num_elements: int, bytes_per_element: int = 2) -> int:
    """Bytes moved to and from memory: read x, write the output."""
    _check_count(num_elements, bytes_per_element)
    return 2 * num_elements * bytes_per_element
