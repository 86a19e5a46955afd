"""A hint belongs to the failure it was written for (autograder.harness.failures and hints): the kind of a
failure, read from the exception and the tensors compared, and what a student's run shows for the mistakes
the handouts warn about."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autograder.harness.failures import distinct, kind, pattern, scale_factor, tensor_kind

ROOT = Path(__file__).resolve().parents[3]


def expected() -> torch.Tensor:
    return torch.linspace(-3.0, 5.0, 40, dtype=torch.float64).reshape(4, 10)


@pytest.mark.parametrize("name, got, found", [
    ("a NaN row", lambda e: torch.cat([torch.full((1, 10), float("nan")), e[1:]]), "nan"),
    ("an infinite element", lambda e: torch.where(torch.arange(40).reshape(4, 10) == 23, float("inf"), e), "nan"),
    ("lse in log2 units", lambda e: e * 1.4426950408889634, "scale"),
    ("a missing 1/sqrt(d)", lambda e: e * 8, "scale"),
    ("TF32 noise", lambda e: e * (1 + 1e-3 * torch.sin(torch.arange(40.0)).reshape(4, 10).double()), "close"),
    ("a wrong row", lambda e: torch.cat([e[:1] + 1, e[1:]]), "values"),
    ("a transposed result", lambda e: e.T, "shape"),
])
def test_a_tensor_mismatch_is_classified_by_what_went_wrong(name, got, found):
    assert tensor_kind(got(expected()), expected(), (1e-4, 1e-4)) == found, name


def test_the_scale_factor_is_the_constant_and_the_message_says_it():
    assert scale_factor(expected() * 0.6931471805599453, expected()) == pytest.approx(0.6931471805599453)
    assert scale_factor(expected(), expected()) is None
    assert pattern(expected() * 2, expected()) == "; everywhere got ≈ 2 × expected (one constant factor)"
    got = expected().clone()
    got[0, :3] = float("nan")
    assert pattern(got, expected()) == "; 3 elements are NaN or infinite where the expected value is finite"


def failure_of(test) -> pytest.ExceptionInfo:
    with pytest.raises(BaseException) as info:
        test()
    return info


def assert_close(name, actual, expected, tolerance):
    """Stands in for the tests' own helpers: the frame a failure's tensors are read from."""
    if not torch.allclose(actual, expected, **tolerance):
        raise AssertionError(f"{name} differs")


def test_a_failure_is_raised_not_raised_or_a_failed_check_of_the_values():
    def did_not_raise():
        with pytest.raises(ValueError):
            pass

    assert kind(failure_of(lambda: int("x"))) == "raised"
    assert kind(failure_of(did_not_raise)) == "did not raise"
    assert kind(failure_of(lambda: assert_close("o", expected() * 3, expected(), dict(rtol=0, atol=0)))) == "scale"
    assert kind(failure_of(lambda: torch.testing.assert_close(expected().T, expected()))) == "shape"
    checked = failure_of(lambda: (_ for _ in ()).throw(AssertionError("got 3, expected 4")))
    assert kind(checked) == "values"
    assert kind(checked, tree=Path(__file__).parent) == "raised"  # an assert in the code under test is its error

    class Remote(AssertionError):
        remote_traceback = "..."  # rebuilt from the grader's worker: the student's code raised it

    assert kind(failure_of(lambda: (_ for _ in ()).throw(Remote("x")))) == "raised"


def test_two_numbers_that_differ_are_shown_with_the_digits_that_differ():
    assert distinct(0.02493151, 0.02493149) == ("0.02493151", "0.02493149")
    assert distinct(0.0249315, 0.0249315) == ("0.0249315", "0.0249315")
    assert distinct(6.10796, 4.23372) == ("6.10796", "4.23372")


# The handouts' own mistakes, planted in the reference and run through the public tests as a student runs them.
PLANTED = {
    # a causal loop that stops one key tile early: the first query tile sees no key (NaN)
    "flash_pytorch.py": ("    n_keys = q_end if is_causal else k.shape[-2]",
                         "    n_keys = q_start if is_causal else k.shape[-2]"),
    # lse left in log2 units
    "flash_triton.py": ("    lse = (m + tl.log2(l)) * LN2", "    lse = (m + tl.log2(l))"),
}


@pytest.mark.triton
def test_the_planted_mistakes_get_the_hints_written_for_them_and_point_at_the_kernel(tmp_path):
    tree = tmp_path / "planted"
    shutil.copytree(ROOT / "solutions" / "flash_attention", tree / "flash_attention",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for file, (right, wrong) in PLANTED.items():
        path = tree / "flash_attention" / file
        assert right in path.read_text()
        path.write_text(path.read_text().replace(right, wrong))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--impl", str(tree),
         "tests/flash_attention/test_flash_pytorch.py", "tests/flash_attention/test_flash_triton.py",
         "-k", "forward_output_matches and 45 and causal or triton_forward_matches and causal"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = done.stdout
    nan, _, lse = out.partition("test_triton_forward_matches_float64[")
    assert "Hint: a row of NaN saw no key at all" in nan and "rescale l and the accumulator" not in nan, out
    assert "512 elements are NaN or infinite where the expected value is finite" in nan, out
    assert "Hint: lse is in natural-log units: the kernel works in log2 units" in lse, out
    assert "input_precision" not in lse and "everywhere got ≈ 1.4427 × expected" in lse, out
    assert "flash_triton._flash_fwd_kernel, the kernel flash_forward_triton launches, which calls _load_rows" in lse
