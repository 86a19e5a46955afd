"""Hidden tests of §7: the benchmark's method and the profiler's top ops on random call patterns and programs.

As in the public tests, nothing depends on this machine's speed: benchmarked calls sleep for durations
drawn here (time.sleep never returns early) or do nothing, and the patterns are built so that each
wrong method (no warm-up, warm-up calls timed, the mean, the minimum or the maximum) lands on the
other kind of call; profiled programs are dominated a hundredfold by their matmuls.
"""

import random

import re

import pytest

from autograder.suites.gpu_kernels import scenarios as hidden
from tests.gpu_kernels import scenarios

pytestmark = pytest.mark.visibility("hidden")

SLOW = 0.15  # seconds


@pytest.fixture
def rng(seed: int, request: pytest.FixtureRequest) -> random.Random:
    """This test's random source: the run's seed and the test's id."""
    return random.Random(f"{seed}/{request.node.nodeid}")


@pytest.mark.points(2)
@pytest.mark.edge
@pytest.mark.task("measure.benchmark")
def test_benchmark_call_counts_and_arguments_at_random_warmup_and_rep(student, rng):
    """For 3 random (warmup, rep) (warmup 0 and rep 1 among them) and argument lists, fn(*args) runs exactly
    warmup + rep times, with the arguments as given, and the result is a float of seconds."""
    for warmup, rep in ((0, rng.randint(1, 4)), (rng.randint(1, 6), 1), (rng.randint(1, 9), rng.randint(2, 12))):
        args = [rng.randint(-9, 9) for _ in range(rng.randint(0, 3))] + rng.choice(([], ["a"], [[1, 2]]))
        got = student.run(scenarios.benchmark_calls, warmup=warmup, rep=rep, args=args)
        assert got["calls"] == warmup + rep, f"warmup={warmup}, rep={rep}: fn ran {got['calls']} times"
        assert got["args"] == [args] * (warmup + rep), f"fn must be called as fn(*{args}); it got {got['args'][:2]}"
        assert type(got["result"]) is float and got["result"] >= 0, f"expected a float of seconds, got {got['result']!r}"


def slow_median_pattern(rng: random.Random) -> tuple[list[float], int, int]:
    """Instant warm-up calls; a bare majority of the timed calls slow, all at the end."""
    warmup, rep = rng.randint(1, 3), rng.choice((5, 7, 9))
    slow = (rep + 1) // 2
    return [0.0] * (warmup + rep - slow) + [SLOW] * slow, warmup, rep


def fast_median_pattern(rng: random.Random) -> tuple[list[float], int, int]:
    """Slow warm-up calls; a bare minority of the timed calls slow, at random places."""
    warmup, rep = rng.randint(2, 3), rng.choice((5, 7))
    timed = [SLOW] * ((rep - 1) // 2) + [0.0] * ((rep + 1) // 2)
    rng.shuffle(timed)
    return [SLOW] * warmup + timed, warmup, rep


@pytest.mark.points(2)
@pytest.mark.task("measure.benchmark")
def test_benchmark_gives_the_median_of_the_timed_calls_for_random_patterns(student, rng):
    """For a random pattern whose timed median is a slow call (≥ 0.15 s) and one whose timed median is an
    instant call (< 0.015 s): the result is on the right side; the mean, the minimum, the maximum, a
    missing warm-up or timed warm-up calls land on the wrong one."""
    durations, warmup, rep = slow_median_pattern(rng)
    got = student.run(scenarios.benchmark_durations, durations=durations, warmup=warmup, rep=rep)
    assert got >= 0.9 * SLOW, f"pattern {durations} with warmup={warmup}, rep={rep}: got {got!r} s, expected ≥ {SLOW}"
    durations, warmup, rep = fast_median_pattern(rng)
    got = student.run(scenarios.benchmark_durations, durations=durations, warmup=warmup, rep=rep)
    assert got < 0.1 * SLOW, f"pattern {durations} with warmup={warmup}, rep={rep}: got {got!r} s, expected an instant call"


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.task("measure.benchmark")
def test_benchmark_synchronizes_before_reading_the_clock_on_cuda(student, rng):
    """A function that queues a CUDA kernel of random length (about 3 to 15 ms) and returns: benchmark's median
    is at least half the kernel's own duration measured with CUDA events."""
    got = student.run(scenarios.benchmark_cuda_sleep, cycles=rng.randint(6, 30) * 10**6, warmup=1, rep=rng.choice((3, 5)))
    assert got["benchmark"] >= 0.5 * got["kernel"], \
        f"benchmark gave {got['benchmark']:.3g} s for a kernel of {got['kernel']:.3g} s: no synchronisation?"


def random_program(rng: random.Random) -> tuple[int, dict]:
    names = rng.sample(sorted(scenarios.ELEMENTWISE), rng.randint(2, 5))
    return rng.randint(1, 3), {name: rng.randint(1, 6) for name in names}


@pytest.mark.points(2)
@pytest.mark.task("measure.profile_top_ops")
def test_profile_top_ops_on_random_programs(student, rng):
    """For 2 random programs (1 to 3 matmuls of 900² to 1100², 2 to 5 kinds of small elementwise ops called 1 to 6
    times each): the matmul first with its call count, self times that never increase, each op once,
    every elementwise op with its exact call count."""
    for _ in range(2):
        matmuls, ops = random_program(rng)
        got = student.run(scenarios.profile_program, matmuls=matmuls, size=rng.randint(900, 1100), ops=ops, k=100)
        assert type(got) is list and got and all(type(e) is tuple and len(e) == 3 and type(e[0]) is str
                                                 and type(e[1]) is float and type(e[2]) is int for e in got), \
            f"expected a list of (name, self_time_us, calls) tuples, got {got!r}"
        names = [name for name, _, _ in got]
        assert len(set(names)) == len(names), f"each op must appear once: {names}"
        assert got[0][0] == "aten::mm" and got[0][2] == matmuls, f"{matmuls} matmuls: expected them first, got {got[0]}"
        times = [t for _, t, _ in got]
        assert times == sorted(times, reverse=True), f"self times must not increase: {times}"
        calls = {name: count for name, _, count in got}
        expected = {f"aten::{name}": count for name, count in ops.items()}
        assert {name: calls.get(name) for name in expected} == expected, f"program {ops}: calls {calls}"


@pytest.mark.points(1)
@pytest.mark.task("measure.profile_top_ops")
def test_profile_top_ops_returns_min_of_k_and_the_ops_that_ran(student, rng):
    """k random from 1 to 4 gives exactly k entries; k larger than the number of distinct ops gives each op once."""
    matmuls, ops = random_program(rng)
    k = rng.randint(1, 4)
    got = student.run(scenarios.profile_program, matmuls=matmuls, size=1024, ops=ops, k=k)
    assert type(got) is list and len(got) == k and got[0][0] == "aten::mm", f"k={k}: got {got!r}"
    every = student.run(scenarios.profile_program, matmuls=matmuls, size=1024, ops=ops, k=10**6)
    names = {name for name, _, _ in every}
    assert len(every) == len(names) < 100 and names >= {f"aten::{name}" for name in ops} | {"aten::mm"}, \
        f"k=10⁶ for the program {ops}: expected every op once, got {every}"


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("measure.profile_top_ops")
def test_profile_top_ops_warms_up_once_outside_the_profile(student, rng):
    """fn runs exactly twice, a warm-up and the profiled call (§7: "call fn(*args) once to warm up, then once
    inside torch.profiler.profile"), and the profile holds the profiled call's ops only: aten::mm, aten::add
    and aten::sigmoid once each."""
    got = student.run(hidden.profile_calls, size=rng.randint(200, 400), k=100)
    assert got["calls"] == 2, f"fn ran {got['calls']} times: expected 2 (one warm-up, one profiled call)"
    counts = {name: calls for name, _, calls in got["top"]}
    assert {name: counts.get(name) for name in ("aten::mm", "aten::add", "aten::sigmoid")} == \
        {"aten::mm": 1, "aten::add": 1, "aten::sigmoid": 1}, f"the profile holds more than one call: {got['top']}"


@pytest.mark.points(1)
@pytest.mark.task("measure.profile_top_ops")
def test_profile_top_ops_ranks_by_self_time_not_total_time(student, rng):
    """Profiling F.linear (no bias) on large matrices: aten::linear contains aten::mm's time in its total but
    has almost no self time, so aten::mm comes first and aten::linear after it."""
    got = student.run(hidden.profile_linear, size=rng.randint(900, 1100), k=100)
    names = [name for name, _, _ in got]
    assert names[0] == "aten::mm" and "aten::linear" in names, f"expected aten::mm first, got {names}"


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.parametrize("function, kwargs, name", [
    pytest.param("benchmark", {"warmup": 2.5, "rep": 5}, "warmup", marks=pytest.mark.task("measure.benchmark")),
    pytest.param("benchmark", {"warmup": 1, "rep": -3}, "rep", marks=pytest.mark.task("measure.benchmark")),
    pytest.param("profile_top_ops", {"k": -1}, "k", marks=pytest.mark.task("measure.profile_top_ops")),
])
def test_measure_functions_reject_invalid_counts(student, function, kwargs, name):
    """A float warmup, a negative rep or k raise ValueError naming the argument."""
    got = student.run(scenarios.measure_error, function=function, kwargs=kwargs)
    named = re.search(rf"\b{name}\b", got.removeprefix("ValueError: "))  # the name as a word, not a letter of one
    assert got.startswith("ValueError") and named, f"expected a ValueError naming {name!r}, got: {got}"
