"""Scenarios of the hidden gpu_kernels tests: they run in the sandboxed worker beside the submission and
return plain data only (the public ones, in tests/gpu_kernels/scenarios.py, are used here too)."""

import kernels  # noqa: F401  (selects Triton's mode before anything imports Triton)
import torch
import torch.nn.functional as F

# --- counting and measurement ------------------------------------------------------------------------


def profile_linear(size: int, k: int) -> list:
    """profile_top_ops of F.linear(x, w) without a bias, on (size, size) matrices: aten::linear wraps aten::mm."""
    from gpu_kernels.measure import profile_top_ops

    generator = torch.Generator().manual_seed(0)
    x, w = torch.randn(size, size, generator=generator), torch.randn(size, size, generator=generator)
    return profile_top_ops(F.linear, x, w, k=k)
