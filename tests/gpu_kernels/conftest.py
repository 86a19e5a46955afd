"""The trusted side of the gpu_kernels tests: seeded inputs, float64 expected values and tolerances.

Expected values are PyTorch's own GeLU (tanh approximation), softmax and matmul computed in float64 on
the CPU from the very inputs the student's kernel got (bf16/fp16 inputs are rounded already), never
from the student's code. Tolerances (handout §A.3): |got - expected| <= atol + rtol * |expected|, with
fp32 atol = rtol = 1e-4; bf16 2e-2 and fp16 1e-2 for GeLU; a softmax in bf16/fp16 with the same rtol
and an atol of 1e-6 (its probabilities are mostly far below 2e-2, so an atol of 2e-2 would check almost
none of them; 1e-6 covers fp16's subnormals); a matmul in bf16/fp16 is compared with 2e-2 / 1e-2 of its
largest expected magnitude (at least 1) as atol (rounding its output to 8 or 11 bits is an error
relative to the sum's size, not to each element's).
"""

from types import SimpleNamespace

import pytest
import torch

from autograder.harness.failures import distinct, pattern

FP32 = dict(atol=1e-4, rtol=1e-4)
HALF = {torch.bfloat16: dict(atol=2e-2, rtol=2e-2), torch.float16: dict(atol=1e-2, rtol=1e-2)}
# Softmax in half precision: relative. Rounding a probability to bf16/fp16 errs by at most 2^-9 / 2^-12 of
# it; below fp16's smallest normal (6.1e-5) its spacing (6e-8) is absolute, within the atol.
SOFTMAX_HALF = {dtype: dict(atol=1e-6, rtol=tol["rtol"]) for dtype, tol in HALF.items()}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def tolerance(dtype: torch.dtype) -> dict:
    return FP32 if dtype == torch.float32 else HALF[dtype]


def randn(seed: int, *shape: int, dtype: torch.dtype = torch.float32, scale: float = 1.0) -> torch.Tensor:
    """A seeded standard normal tensor times `scale`, rounded to `dtype`, on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def apply_view(x: torch.Tensor, view: str | None) -> torch.Tensor:
    """The strided view the kernels are given (the scenarios apply the same one on the device):
    None (dense), "t" (last two dims swapped), "step" (every other column), "offset" (all but the first
    row: a storage offset)."""
    if view is None:
        return x
    if view == "t":
        return x.transpose(-1, -2)
    if view == "step":
        return x[..., ::2]
    if view == "offset":
        return x[1:]
    raise ValueError(f"unknown view {view!r}")


def gelu64(x: torch.Tensor) -> torch.Tensor:
    """GeLU, tanh approximation, in float64."""
    return torch.nn.functional.gelu(x.double(), approximate="tanh")


def softmax64(x: torch.Tensor) -> torch.Tensor:
    """softmax over the last dim in float64."""
    return torch.softmax(x.double(), dim=-1)


def matmul64(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None,
             activation: str | None = None) -> torch.Tensor:
    """activation(a @ b + bias) in float64: bias added first, then the activation."""
    c = a.double() @ b.double()
    if bias is not None:
        c = c + bias.double()
    if activation == "gelu":
        return gelu64(c)
    if activation == "relu":
        return c.relu()
    return c


def matmul_tolerance(dtype: torch.dtype, expected: torch.Tensor) -> dict:
    """fp32: FP32. bf16/fp16: HALF's rtol, and as atol HALF's times the largest |expected| (at least 1)."""
    if dtype == torch.float32:
        return FP32
    scale = max(1.0, float(expected.abs().max())) if expected.numel() else 1.0
    return dict(atol=HALF[dtype]["atol"] * scale, rtol=HALF[dtype]["rtol"])


def assert_close(name: str, actual, expected: torch.Tensor, dtype: torch.dtype, tol: dict) -> None:
    """actual is a tensor of expected's shape and of `dtype`, within `tol` of expected everywhere."""
    assert type(actual) is torch.Tensor, f"{name}: expected a torch.Tensor, got {type(actual).__name__}"
    assert tuple(actual.shape) == tuple(expected.shape), \
        f"{name}: expected shape {tuple(expected.shape)}, got {tuple(actual.shape)}"
    assert actual.dtype == dtype, f"{name}: expected dtype {dtype} (the input's), got {actual.dtype}"
    actual, expected = actual.double(), expected.double()
    excess = (actual - expected).abs() - (tol["atol"] + tol["rtol"] * expected.abs())
    # Within tolerance, or equal (an infinity where one is expected): a NaN, or an infinite expected value
    # missed (inf - inf is NaN, never over the tolerance), is an element that differs.
    bad = int((~((excess <= 0) | (actual == expected))).sum())
    if bad:
        worst = int(torch.nan_to_num(excess, nan=float("inf")).argmax())
        where = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), expected.shape))
        got, want = distinct(actual.flatten()[worst].item(), expected.flatten()[worst].item())
        raise AssertionError(
            f"{name}: {bad} of {expected.numel()} elements differ by more than atol={tol['atol']:.3g} + "
            f"rtol={tol['rtol']:.3g} * |expected|; worst at index {where}: got {got}, expected {want}"
            + pattern(actual, expected, (tol["rtol"], tol["atol"])))


@pytest.fixture(scope="session")
def trusted() -> SimpleNamespace:
    """The trusted helpers above, as one fixture."""
    return SimpleNamespace(randn=randn, view=apply_view, gelu64=gelu64, softmax64=softmax64, matmul64=matmul64,
                           assert_close=assert_close, tolerance=tolerance, matmul_tolerance=matmul_tolerance,
                           fp32=FP32, half=HALF, softmax_half=SOFTMAX_HALF, dtypes=DTYPES)
