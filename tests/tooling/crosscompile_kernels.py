"""Kernels for tests/tooling/test_crosscompile.py, built for a GPU through the grader's request path.

A tutorial-style matmul (Triton's 03-matrix-multiplication: a K loop of tile loads and tl.dot), launched
with its tiles, warps and stages chosen by the caller, so that a test can plant a config.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _tutorial_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                            stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def tutorial_matmul(a, b, block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3):
    """a @ b with the tiles, warps and stages given (a GPU launch; the dry run records it)."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty(m, n, dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _tutorial_matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                                  c.stride(1), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                                  num_warps=num_warps, num_stages=num_stages)
    return c


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    pid = tl.program_id(0)
    if WIDE:  # int64 offsets, as the handouts ask; WIDE=False plants 32-bit offsets
        pid = pid.to(tl.int64)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)


def scale_where_a_gpu_is(x, num_warps=4, wide=True):
    """2 x with a Triton kernel where the usual ways of asking say there is a GPU, else with torch: the
    student habit the dry run must serve (it launches nothing if any answer is a CPU's)."""
    from kernels.device import interpreted

    on_gpu = torch.cuda.is_available() and x.is_cuda and x.device.type == "cuda" and not interpreted()
    if not on_gpu:
        return x * 2
    out = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024, WIDE=wide,
                                                       num_warps=num_warps)
    return out
