"""The trusted side of the hidden flash_attention suite: random draws, float64 expectations, timing.

Shapes, tiles and seeds are drawn from the run's seed (the `seed` fixture, fixed with --seed), one
random.Random per test. Expected values are PyTorch's own attention and its autograd in float64, through the
public suite's helpers (tests/flash_attention/conftest.py), with the handout's tolerances (§A.6). Times are taken
here, with this process's clock, around whole calls into the worker.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import pytest
import torch

from autograder.suites.flash_attention import scenarios
from tests.flash_attention.conftest import FP32, HALF, assert_close, attention64, gradients64, make_inputs


@dataclass(frozen=True)
class Case:
    """One drawn attention problem: shapes, causality and tiles."""

    lead: tuple
    n_queries: int
    n_keys: int
    head_dim: int
    is_causal: bool
    q_tile: int | None = None
    k_tile: int | None = None

    def __str__(self) -> str:
        tiles = f", tiles {self.q_tile}x{self.k_tile}" if self.q_tile else ""
        return (f"lead {self.lead}, n_queries {self.n_queries}, n_keys {self.n_keys}, d {self.head_dim}, "
                f"{'causal' if self.is_causal else 'not causal'}{tiles}")

    def inputs(self, seed: int, dtype: torch.dtype = torch.float32) -> dict:
        """Seeded q, k, v, do of this case's shapes, on the CPU."""
        return make_inputs(seed, self.lead, self.n_queries, self.n_keys, self.head_dim, dtype)


def draw_case(rng: random.Random, *, lengths: tuple[int, int], head_dims, tiles=None, lead_ranks=(1, 2, 3),
              lead_sizes=(1, 3), causal: bool | None = None, lead: tuple | None = None) -> Case:
    """A random Case: lead dims of a rank from `lead_ranks`, lengths in `lengths` (n_keys == n_queries
    when causal, n_keys != n_queries otherwise), a head dim from `head_dims`, and, when `tiles` is given,
    q and k tiles drawn from it."""
    if lead is None:
        lead = tuple(rng.randint(*lead_sizes) for _ in range(rng.choice(lead_ranks)))
    is_causal = rng.random() < 0.5 if causal is None else causal
    n_queries = rng.randint(*lengths)
    others = [n for n in range(lengths[0], lengths[1] + 1) if n != n_queries] or [n_queries]
    n_keys = n_queries if is_causal else rng.choice(others)
    q_tile, k_tile = (rng.choice(tiles), rng.choice(tiles)) if tiles else (None, None)
    return Case(lead, n_queries, n_keys, rng.choice(head_dims), is_causal, q_tile, k_tile)


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool) -> torch.Tensor:
    """softmax(q kᵀ / sqrt(d)) v in the inputs' dtype, the naive way (the speed baseline)."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def seconds(call: Callable[[], object]) -> tuple[float, object]:
    """Wall-clock seconds of call() by this process's clock, and what it returned."""
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def median_ratio(student: Callable[[], float], trusted: Callable[[], float], rounds: int = 5) -> tuple[float, list]:
    """The median of student() / trusted() over `rounds` alternations (each returns seconds)."""
    ratios = []
    for _ in range(rounds):
        ratios.append(student() / trusted())
    return statistics.median(ratios), ratios


def trusted_loop(fn: Callable, seed: int, shape: tuple, dtype: torch.dtype, iterations: int, device: str) -> float:
    """Seconds to run fn(q, k, v, do) on the same fresh inputs as scenarios.timed_triton, synchronised."""
    started = time.perf_counter()
    for i in range(iterations):
        fn(*scenarios.seeded_randn(seed + i, [shape] * 4, device, dtype))
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def assert_value_error(what: str, call: Callable[[], object]) -> None:
    """call() raises ValueError; any other exception propagates, a return fails with `what`."""
    try:
        call()
    except ValueError:
        return
    raise AssertionError(f"{what}: expected ValueError, but the call returned without raising")


def bad_inputs(rng: random.Random) -> dict[str, tuple]:
    """Random (q, k, v, is_causal) outside the input contract (handout §3), by what is wrong."""
    lead = tuple(rng.randint(1, 3) for _ in range(rng.randint(1, 3)))
    other_lead = (lead[0] + rng.randint(1, 2), *lead[1:])
    n_queries, d = rng.randint(2, 24), rng.choice((8, 16, 32))
    n_keys = rng.choice([n for n in range(2, 25) if n != n_queries])
    other_d = rng.choice([x for x in (8, 16, 24, 32) if x != d])
    zeros = torch.zeros
    cases = {
        "causal with n_queries != n_keys": ((*lead, n_queries, d), (*lead, n_keys, d), (*lead, n_keys, d), True),
        "q and k head dims differ": ((*lead, n_queries, d), (*lead, n_keys, other_d), (*lead, n_keys, other_d),
                                     False),
        "k and v lengths differ": ((*lead, n_queries, d), (*lead, n_keys, d), (*lead, n_keys + 1, d), False),
        "leading dims differ": ((*lead, n_queries, d), (*other_lead, n_keys, d), (*other_lead, n_keys, d), False),
    }
    found = {what: (zeros(q), zeros(k), zeros(v), causal) for what, (q, k, v, causal) in cases.items()}
    q, k, v = zeros(*lead, n_queries, d), zeros(*lead, n_keys, d), zeros(*lead, n_keys, d, dtype=torch.float64)
    found["v's dtype differs"] = (q, k, v, False)
    return found


def negative_rows(case: Case, seed: int) -> dict:
    """Seeded q, k, v (float32) of `case`'s shapes where every score of every other query row lies far below
    zero (between about -175 and -700 after the 1/sqrt(d) scale) and the other rows' scores are ordinary.
    A running maximum started at 0 instead of -inf underflows there (exp(s - 0) = 0 for every key: l = 0, o
    and lse NaN or inf); the maximum so far, as the handout defines it, gives the softmax up to rounding.

    The far rows' products are exact in float32 (keys are multiples of 1/8 in [0.5, 1.5), those query rows a
    negative power of two times ones), so the only rounding left is the scale's: well within 1e-4."""
    generator = torch.Generator().manual_seed(seed)
    k_shape = (*case.lead, case.n_keys, case.head_dim)
    k = torch.randint(4, 12, k_shape, generator=generator).float() / 8
    q = torch.randn((*case.lead, case.n_queries, case.head_dim), generator=generator)
    far = 2.0 ** math.ceil(math.log2(250 / math.sqrt(case.head_dim)))  # scores about -far·sqrt(d)
    q[..., ::2, :] = -far
    return {"q": q, "k": k, "v": torch.randn(k_shape, generator=generator)}


def bad_tiles(rng: random.Random) -> list[int]:
    """Three Triton tile sizes that break the rule (powers of two, at least 16): one below 16, two that
    are not powers of two."""
    below = rng.choice((1, 2, 4, 8, 12, 15))
    return [below] + rng.sample([t for t in range(17, 257) if t & (t - 1)], 2)


@pytest.fixture
def rng(seed: int, request: pytest.FixtureRequest) -> random.Random:
    """This test's random draws: from the run's seed and the test's id, so each test draws its own."""
    return random.Random(f"{seed}/{request.node.nodeid}")


def helpers() -> SimpleNamespace:
    """The trusted helpers above, as one namespace (the `trusted` fixture)."""
    return SimpleNamespace(attention64=attention64, gradients64=gradients64, assert_close=assert_close,
                           fp32=FP32, half=HALF, draw=draw_case, naive=naive_attention, seconds=seconds,
                           median_ratio=median_ratio, loop=trusted_loop, value_error=assert_value_error,
                           bad_inputs=bad_inputs, bad_tiles=bad_tiles, negative_rows=negative_rows)


@pytest.fixture(scope="session")
def trusted() -> SimpleNamespace:
    """The trusted helpers of this suite."""
    return helpers()
