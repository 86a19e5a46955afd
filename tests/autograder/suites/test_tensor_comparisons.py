"""The suites' tensor comparisons (the public conftests' assert_close, the hidden resource_accounting suite's
assert_tensor): within |actual - expected| <= atol + rtol·|expected| everywhere, and nothing slips through the
arithmetic of infinities and NaNs (inf - inf is NaN, which is never "over the tolerance")."""

import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
CONFTESTS = {"gpu_kernels": "tests/gpu_kernels/conftest.py", "flash_attention": "tests/flash_attention/conftest.py",
             "resource_accounting (hidden)": "autograder/suites/resource_accounting/conftest.py"}


def comparison(where: str):
    """compare(actual, expected) -> None or AssertionError, with rtol 1e-3 and atol 1e-5 in float32."""
    spec = importlib.util.spec_from_file_location(f"conftest_{len(where)}", ROOT / CONFTESTS[where])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if hasattr(module, "assert_tensor"):
        return lambda actual, expected: module.assert_tensor("x", actual, expected, dtype=torch.float32,
                                                             rtol=1e-3, atol=1e-5)
    return lambda actual, expected: module.assert_close("x", actual, expected, torch.float32,
                                                        {"rtol": 1e-3, "atol": 1e-5})


INF, NAN = float("inf"), float("nan")
CASES = [  # (actual, expected, passes)
    ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0005], True),
    ([1.0, 2.0, 3.1], [1.0, 2.0, 3.0], False),
    ([1.0, INF, -INF], [1.0, INF, -INF], True),
    ([1.0, 5.0, 3.0], [1.0, INF, 3.0], False),  # an expected infinity missed
    ([1.0, -INF, 3.0], [1.0, INF, 3.0], False),
    ([1.0, INF, 3.0], [1.0, 2.0, 3.0], False),
    ([1.0, NAN, 3.0], [1.0, 2.0, 3.0], False),
    ([1.0, NAN, 3.0], [1.0, NAN, 3.0], False),  # no expected value here is NaN; a NaN never matches
]


@pytest.mark.parametrize("where", list(CONFTESTS))
@pytest.mark.parametrize("actual, expected, passes", CASES)
def test_a_comparison_passes_only_within_tolerance_or_equal(where, actual, expected, passes):
    compare = comparison(where)
    actual, expected = torch.tensor(actual), torch.tensor(expected)
    if passes:
        compare(actual, expected)
    else:
        with pytest.raises(AssertionError, match="1 of 3 elements differ"):
            compare(actual, expected)
