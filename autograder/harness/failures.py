"""What kind of failure a test met, so that a hint is shown only for the failure it was written for.

The kinds, from the exception a test failed with (its traceback's locals where tensors were compared):
  raised          the code under test raised (any exception but the test's own AssertionError)
  did not raise   `pytest.raises` saw no exception
  shape           the tensors compared differ in shape or dtype
  nan             the result holds NaN or infinity where the expected value is finite
  scale           the result is the expected value times one constant (not 1) everywhere: a missing or extra
                  factor (1/sqrt(d), ln 2, a unit)
  close           every element is near its expected value (within 1% of the largest) but not within the
                  tolerance: precision (TF32, a bf16 dot, an fp16 sum), not the method
  values          any other failed check
Tensors are found where a test compared them: in the frame of a function named `assert_close` (torch's,
or the tests' own helpers) whose locals `actual` and `expected` are tensors, with its tolerance (`rtol` and
`atol`, or a dict `tolerance` or `tol` holding them). The same classification runs in a student's run and
in the grader's process, which compares the values the worker sent back.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

KINDS = ("raised", "did not raise", "shape", "nan", "scale", "close", "values")
CHECKED = KINDS[1:]  # the test's own check failed (the code under test ran to the end)
NEAR = 0.01  # "close": every element within 1% of the largest expected magnitude

# torch.testing.assert_close's defaults (rtol, atol) by dtype, from its documentation, for a call without them.
DEFAULT_TOLERANCES = {"torch.float16": (1e-3, 1e-5), "torch.bfloat16": (1.6e-2, 1e-5),
                      "torch.float32": (1.3e-6, 1e-5), "torch.float64": (1e-7, 1e-7),
                      "torch.complex64": (1.3e-6, 1e-5), "torch.complex128": (1e-7, 1e-7)}


def compared_tensors(excinfo: pytest.ExceptionInfo, helpers: bool = True) -> tuple | None:
    """(actual, expected, (rtol, atol)) from the frame of an `assert_close` that raised on two tensors, or None;
    `helpers`: the tests' own assert_close too, not only torch's."""
    torch = sys.modules.get("torch")
    if torch is None or not excinfo.errisinstance(AssertionError):
        return None
    for entry in reversed(excinfo.traceback):
        if entry.frame.code.name != "assert_close" or not (helpers or "torch" in str(entry.path)):
            continue
        found = entry.frame.f_locals
        actual, expected = found.get("actual"), found.get("expected")
        if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)):
            continue
        given = next((found[name] for name in ("tolerance", "tol") if isinstance(found.get(name), dict)), found)
        rtol, atol = given.get("rtol"), given.get("atol")
        if not isinstance(rtol, (int, float)) or not isinstance(atol, (int, float)):
            rtol, atol = DEFAULT_TOLERANCES.get(str(expected.dtype), (0.0, 0.0))
        return actual, expected, (float(rtol), float(atol))
    return None


def scale_factor(actual, expected, tolerance: tuple[float, float] = (0.0, 0.0)) -> float | None:
    """c when actual ≈ c · expected everywhere for one constant c ≠ 1 (c · expected within 10x the tolerance,
    or 1e-4 of the largest magnitude, of actual), else None. Both finite, the same shape, not all zero."""
    got, want = actual.detach().cpu().double().flatten(), expected.detach().cpu().double().flatten()
    norm = float((want * want).sum())
    if got.numel() == 0 or norm == 0.0 or not bool(got.isfinite().all() and want.isfinite().all()):
        return None
    c = float((got * want).sum()) / norm
    rtol, atol = tolerance
    allowed = 10 * (atol + rtol * (c * want).abs()) + 1e-4 * float(want.abs().max()) * abs(c)
    if abs(c - 1.0) <= 1e-3 or not bool(((got - c * want).abs() <= allowed).all()):
        return None
    return c


def tensor_kind(actual, expected, tolerance: tuple[float, float] = (0.0, 0.0)) -> str:
    """The kind of a mismatch between two tensors (see the module): shape, nan, scale, close or values."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return "shape"
    got, want = actual.detach().cpu().double(), expected.detach().cpu().double()
    if bool((~got.isfinite() & want.isfinite()).any()):
        return "nan"
    if scale_factor(got, want, tolerance) is not None:
        return "scale"
    largest = float(want.abs().max()) if want.numel() else 0.0
    if want.numel() and bool(((got - want).abs() <= NEAR * largest).all()):
        return "close"
    return "values"


def pattern(actual, expected, tolerance: tuple[float, float] = (0.0, 0.0)) -> str:
    """What a mismatch of two tensors of one shape has in common, for a message: "; 3 elements are NaN or
    infinite where ...", "; everywhere got ≈ 0.693147 × expected ...", or ""."""
    got, want = actual.detach().cpu().double(), expected.detach().cpu().double()
    found = tensor_kind(got, want, tolerance)
    if found == "nan":
        return (f"; {int((~got.isfinite() & want.isfinite()).sum())} elements are NaN or infinite where the expected "
                "value is finite")
    if found == "scale":
        return f"; everywhere got ≈ {scale_factor(got, want, tolerance):.6g} × expected (one constant factor)"
    return ""


def kind(excinfo: pytest.ExceptionInfo | None, tree: Path | None = None) -> str:
    """The kind of the failure `excinfo` holds (see the module); "" when there is none. `tree`: the code under
    test, in this process (an AssertionError raised there, or sent back from the grader's worker, is the
    code's own exception, not the test's check)."""
    if excinfo is None:
        return ""
    if excinfo.errisinstance(pytest.fail.Exception) and "DID NOT RAISE" in str(excinfo.value):
        return "did not raise"
    remote = hasattr(excinfo.value, "remote_traceback")  # rebuilt from the worker (autograder.sandbox.process)
    last = Path(str(excinfo.traceback[-1].path)) if len(excinfo.traceback) else None
    if not excinfo.errisinstance(AssertionError) or remote or (tree and last and last.is_relative_to(tree)):
        return "raised"
    compared = compared_tensors(excinfo)
    return tensor_kind(*compared) if compared is not None else "values"


def distinct(got: float, expected: float, digits: int = 6) -> tuple[str, str]:
    """got and expected with `digits` significant digits, or as many more as it takes to tell them apart."""
    for places in range(digits, 18):
        shown = (f"{got:.{places}g}", f"{expected:.{places}g}")
        if shown[0] != shown[1] or got == expected:
            return shown
    return repr(got), repr(expected)
