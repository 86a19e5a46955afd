"""The trusted side of the hidden resource_accounting tests: per-test random draws and comparisons.

Every test draws its sizes, dtypes and seeds from `rng`, a random.Random seeded from this run's seed
(`--seed`, random per grading run) and the test's own id, so one test's draws do not shift when
another test changes, and the same `--seed` reproduces a failure. `explore` does the same for
hypothesis. Expected values are computed here, never by the student's code.
"""

import random
from types import SimpleNamespace

import hypothesis
import pytest
import torch
from hypothesis import HealthCheck, Phase, settings
from torch.utils.flop_counter import FlopCounterMode


@pytest.fixture(scope="session")
def memory(student):
    return student.module("resource_accounting.memory")


@pytest.fixture(scope="session")
def einops_ops(student):
    return student.module("resource_accounting.einops_ops")


@pytest.fixture(scope="session")
def flops(student):
    return student.module("resource_accounting.flops")


@pytest.fixture(scope="session")
def network(student):
    return student.module("resource_accounting.network")


@pytest.fixture(scope="session")
def training(student):
    return student.module("resource_accounting.training")


@pytest.fixture
def rng(seed: int, request: pytest.FixtureRequest) -> random.Random:
    """This test's random source: the run's seed and the test's id (a str seed is hashed stably)."""
    return random.Random(f"{seed}/{request.node.nodeid}")


@pytest.fixture
def explore(rng: random.Random):
    """`@explore(n)` on a @given function: n examples, seeded from `rng`, no database, no deadline.

    Shrinking stays on (a failure is reported as a small example), but is bounded by hypothesis.
    """

    def decorate(max_examples: int):
        def wrap(test):
            configured = settings(max_examples=max_examples, deadline=None, derandomize=False, database=None,
                                  phases=(Phase.explicit, Phase.generate, Phase.shrink),
                                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])(test)
            return hypothesis.seed(rng.randrange(2**32))(configured)

        return wrap

    return decorate


def mode_counts(run) -> dict:
    """What torch's own FlopCounterMode counts while `run()` runs: {"total": int, "by_op": {name: int}}."""
    with FlopCounterMode(display=False) as mode:
        run()
    by_op = {str(op): int(count) for op, count in mode.get_flop_counts().get("Global", {}).items() if count}
    return {"total": int(mode.get_total_flops()), "by_op": by_op}


def assert_counts(got, expected: dict, context: str) -> None:
    """`got` (a scenario's {"total", "by_op"}) equals `expected`, with ints only, else a message with context."""
    assert type(got) is dict and set(got) == {"total", "by_op"}, f"{context}: malformed scenario result {got!r}"
    assert type(got["total"]) is int, f"{context}: total_flops must be an int, got {type(got['total']).__name__}"
    assert type(got["by_op"]) is dict and all(type(k) is str and type(v) is int for k, v in got["by_op"].items()), \
        f"{context}: flops_by_op must map str to int, got {got['by_op']!r}"
    assert got["by_op"] == expected["by_op"], f"{context}: flops_by_op {got['by_op']}, expected {expected['by_op']}"
    assert got["total"] == expected["total"], f"{context}: total_flops {got['total']}, expected {expected['total']}"


def assert_tensor(name: str, actual, expected: torch.Tensor, *, dtype: torch.dtype | None = None,
                  rtol: float = 0.0, atol: float = 0.0) -> None:
    """`actual` is a plain tensor of expected's shape (and `dtype`), within |a - e| <= atol + rtol·|e|.

    With rtol = atol = 0 the comparison is exact. Written out because torch.testing's first call
    costs over a second of imports.
    """
    assert type(actual) is torch.Tensor, f"{name}: expected a torch.Tensor, got {type(actual).__name__}"
    assert tuple(actual.shape) == tuple(expected.shape), \
        f"{name}: expected shape {tuple(expected.shape)}, got {tuple(actual.shape)}"
    if dtype is not None:
        assert actual.dtype == dtype, f"{name}: expected dtype {dtype}, got {actual.dtype}"
    if rtol == 0 and atol == 0:
        differ = int((actual.to(expected.dtype) != expected).sum())
        assert differ == 0, f"{name}: not equal to the expected tensor ({differ} of {expected.numel()} elements differ)"
        return
    actual, expected = actual.double(), expected.double()
    excess = (actual - expected).abs() - (atol + rtol * expected.abs())
    # Within tolerance, or equal (an infinity where one is expected): a NaN, or an infinite expected value
    # missed (inf - inf is NaN, never over the tolerance), is an element that differs.
    bad = int((~((excess <= 0) | (actual == expected))).sum())
    if bad:
        worst = int(torch.nan_to_num(excess, nan=float("inf")).flatten().argmax())
        got, want = actual.flatten()[worst].item(), expected.flatten()[worst].item()
        raise AssertionError(f"{name}: {bad} of {expected.numel()} elements differ by more than atol={atol:g} + "
                             f"rtol={rtol:g}·|expected|; worst: got {got:.8g}, expected {want:.8g}")


@pytest.fixture(scope="session")
def trusted() -> SimpleNamespace:
    """The trusted helpers above, as one fixture."""
    return SimpleNamespace(mode_counts=mode_counts, assert_counts=assert_counts, assert_tensor=assert_tensor)
