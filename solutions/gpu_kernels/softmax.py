"""Softmax over the last dim as one fused Triton kernel, one program per row (handout §3).

softmax(x)_j = exp(x_j - m) / sum_i exp(x_i - m), with m = max_i x_i: subtracting the row maximum
keeps every exp at most 1, so nothing overflows (exp(89) is already inf in float32).

A row that fits in one block (BLOCK >= n_cols) is loaded once, reduced, and stored once. A longer
row is walked twice, block by block: the first pass keeps a running maximum m and a running sum l
of exp(x - m), kept against the current maximum when a block raises it (the online softmax, §3);
the second pass writes exp(x - m) / l. So x is read once per pass and the output written once:
two reads of x instead of the three of max, sum and write passes, and nothing but two numbers per
row kept between the passes.
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

from gpu_kernels.elementwise import check_float_tensor, require_triton

# Largest block (columns a program loads at once): a GPU keeps 4096 fp32 values in the registers of
# 8 warps; the interpreter runs each block as numpy arrays, where small blocks cost nothing extra.
MAX_BLOCK_GPU = 4096
MAX_BLOCK_INTERPRETED = 256


def _check_block_size(block_size) -> None:
    if type(block_size) is not int or block_size < 16 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two >= 16 (tl.arange needs a power of two), "
                         f"got {block_size!r}")


@triton.jit
def _softmax_kernel(X, Y, n_cols, stride_xr, stride_xc, stride_yr, BLOCK: tl.constexpr, ONE_BLOCK: tl.constexpr):
    """One program: the softmax of row pid of X into row pid of Y (dense), in fp32, stored in Y's dtype.

    ONE_BLOCK: the row fits in one block (n_cols <= BLOCK): one load, one store. Otherwise the online
    pass for (m, l), then the writing pass.

    Handout: §3 A fused row softmax
    """
    ### BEGIN SOLUTION
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_xr
    y_row = Y + row * stride_yr
    cols = tl.arange(0, BLOCK)
    if ONE_BLOCK:
        mask = cols < n_cols
        x = tl.load(x_row + cols * stride_xc, mask=mask, other=float("-inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, 0))  # masked columns: exp(-inf) = 0
        tl.store(y_row + cols, (e / tl.sum(e, 0)).to(Y.dtype.element_ty), mask=mask)
    else:
        m = float("-inf")
        l = 0.0
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            x = tl.load(x_row + (start + cols) * stride_xc, mask=mask, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, 0))  # every block has a column < n_cols: m_new is finite
            l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)
            m = m_new
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            x = tl.load(x_row + (start + cols) * stride_xc, mask=mask, other=float("-inf")).to(tl.float32)
            tl.store(y_row + start + cols, (tl.exp(x - m) / l).to(Y.dtype.element_ty), mask=mask)
    ### END SOLUTION


def softmax_triton(x: torch.Tensor, block_size: int | None = None) -> torch.Tensor:
    """softmax(x) over the last dim (as torch.softmax(x, dim=-1)), by one Triton kernel, one program per row.

    Any leading dims and strides; float32, bfloat16 or float16, computed in float32; returns a new dense
    tensor of x's shape and dtype. block_size: the columns a program loads at once (a power of two >= 16);
    by default the row length rounded up to a power of two, at most 4096 on a GPU and 256 interpreted.
    Rows longer than a block take the online pass, then the writing pass. TypeError for a non-float
    tensor, ValueError for a 0-d tensor or a bad block_size.

    Handout: §3 A fused row softmax
    """
    ### BEGIN SOLUTION
    check_float_tensor("x", x)
    if x.dim() == 0:
        raise ValueError("x must have at least one dim (softmax runs over the last); got a 0-d tensor")
    if block_size is not None:
        _check_block_size(block_size)
    require_triton()
    n_cols = x.shape[-1]
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    rows = x.reshape(-1, n_cols)  # a view when the leading dims allow it, else a copy
    largest = MAX_BLOCK_INTERPRETED if interpreted() else MAX_BLOCK_GPU
    block = block_size or min(triton.next_power_of_2(n_cols), largest)
    block = max(block, 16)
    _softmax_kernel[(rows.shape[0],)](rows, y, n_cols, rows.stride(0), rows.stride(1), n_cols, BLOCK=block,
                                      ONE_BLOCK=n_cols <= block, num_warps=8 if block >= 2048 else 4)
    return y
    ### END SOLUTION
