"""The trusted side of the hidden gpu_kernels suite: random draws, float64 expectations, timing.

Shapes, strides, block sizes and seeds are drawn from the run's seed (the `seed` fixture, fixed with
--seed), one random.Random per test. Expected values are the public suite's float64 GeLU, softmax and
matmul (tests/gpu_kernels/conftest.py), with the handout's tolerances (§A.3). Times are taken here,
with this process's clock, around whole calls into the worker.
"""

from __future__ import annotations

import random
import statistics
import time
from types import SimpleNamespace
from typing import Callable

import pytest
import torch

from tests.gpu_kernels.conftest import (DTYPES, FP32, HALF, SOFTMAX_HALF, apply_view, assert_close, gelu64,
                                        matmul64, matmul_tolerance, randn, softmax64, tolerance)

VIEWS = (None, "t", "step", "offset")


def draw_view(rng: random.Random, shape: tuple, strided: bool = False) -> tuple[tuple, str | None]:
    """A random stored shape and view whose result has `shape`: dense, transposed, every other column or
    all rows but the first (a storage offset); with `strided`, one that is not dense (transposed or a
    column step)."""
    views = VIEWS if len(shape) >= 2 else (None, "step", "offset")
    view = rng.choice([v for v in views if v in ("t", "step")] if strided else views)
    if view == "t":
        return (*shape[:-2], shape[-1], shape[-2]), view
    if view == "step":
        return (*shape[:-1], 2 * shape[-1] - rng.randint(0, 1)), view
    if view == "offset":
        return (shape[0] + 1, *shape[1:]), view
    return shape, view


def draw_shape(rng: random.Random, ranks=(1, 2, 3), sizes=(1, 40)) -> tuple:
    return tuple(rng.randint(*sizes) for _ in range(rng.choice(ranks)))


def seconds(call: Callable[[], object]) -> tuple[float, object]:
    """Wall-clock seconds of call() by this process's clock, and what it returned."""
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def median_of(rounds: int, measure: Callable[[], float]) -> tuple[float, list]:
    """The median of `rounds` calls of measure() (each returns a number), and all of them."""
    values = [measure() for _ in range(rounds)]
    return statistics.median(values), values


def assert_error(what: str, errors: tuple, call: Callable[[], object]) -> None:
    """call() raises one of `errors`; any other exception propagates, a return fails with `what`."""
    try:
        call()
    except errors:
        return
    names = " or ".join(e.__name__ for e in errors)
    raise AssertionError(f"{what}: expected {names}, but the call returned without raising")


@pytest.fixture
def rng(seed: int, request: pytest.FixtureRequest) -> random.Random:
    """This test's random draws: from the run's seed and the test's id, so each test draws its own."""
    return random.Random(f"{seed}/{request.node.nodeid}")


def helpers() -> SimpleNamespace:
    """The trusted helpers above, as one namespace (the `trusted` fixture)."""
    return SimpleNamespace(randn=randn, view=apply_view, draw_view=draw_view, draw_shape=draw_shape, gelu64=gelu64,
                           softmax64=softmax64, matmul64=matmul64, assert_close=assert_close, tolerance=tolerance,
                           matmul_tolerance=matmul_tolerance, fp32=FP32, half=HALF, softmax_half=SOFTMAX_HALF,
                           dtypes=DTYPES, seconds=seconds,
                           median_of=median_of, error=assert_error)


@pytest.fixture(scope="session")
def trusted() -> SimpleNamespace:
    """The trusted helpers of this suite."""
    return helpers()
