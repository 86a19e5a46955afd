"""§7: the benchmark's method (warm-up, synchronisation, median) and the profiler's top ops, by behaviour.

No test here depends on how fast this machine is: the functions benchmarked sleep for durations the
test chooses (time.sleep never returns early), so a right method and a wrong one differ by a large
factor, and the profiled program is dominated a hundredfold by its matmuls (large enough that a time slice
lost to another process inside a small op does not change the order).
"""

import re

import pytest

from tests.gpu_kernels import scenarios

SLOW = 0.2  # seconds: a "slow" call of the functions benchmarked below; the others do nothing


@pytest.mark.points(2)
@pytest.mark.edge
@pytest.mark.task("measure.benchmark")
def test_benchmark_runs_fn_warmup_plus_rep_times_with_its_arguments(student):
    """benchmark(fn, *args, warmup=3, rep=5) calls fn(*args) exactly 8 times and returns a float (seconds)."""
    got = student.run(scenarios.benchmark_calls, warmup=3, rep=5, args=[7, "x"])
    assert got["calls"] == 8, f"fn ran {got['calls']} times, expected warmup + rep = 8"
    assert got["args"] == [[7, "x"]] * 8, f"fn must be called as fn(*args); it got {got['args'][:2]}..."
    assert type(got["result"]) is float and got["result"] >= 0, f"expected seconds as a float, got {got['result']!r}"


@pytest.mark.points(2)
@pytest.mark.task("measure.benchmark")
def test_benchmark_returns_the_median_of_the_timed_runs_only(student):
    """benchmark returns the median of its timed calls alone, for two functions whose calls sleep 0.2 s or
    nothing (2 warm-up and 7 timed calls each).

    - warm-up calls instant, then 3 instant and 4 slow timed calls: the median is a slow call (≥ 0.2 s);
      not warming up, or counting the warm-up calls, puts the median on an instant call; the mean is 0.11 s;
    - warm-up calls slow, then 2 slow among 7 timed calls: the median is an instant call (under 0.02 s);
      the mean (0.057 s) or the maximum is not.

    Hint: statistics.median of the rep durations measured after the warm-up.
    """
    slow_median = student.run(scenarios.benchmark_durations, durations=[0, 0, 0, 0, 0] + [SLOW] * 4, warmup=2, rep=7)
    assert slow_median >= 0.9 * SLOW, f"got {slow_median!r} s: expected the median of the timed calls, a slow one"
    fast_median = student.run(scenarios.benchmark_durations, durations=[SLOW, SLOW, 0, SLOW, 0, 0, SLOW, 0, 0],
                              warmup=2, rep=7)
    assert fast_median < 0.1 * SLOW, f"got {fast_median!r} s: expected the median of the timed calls, an instant one"


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.task("measure.benchmark")
def test_benchmark_waits_for_the_cuda_kernel_to_finish(student):
    """A function that queues a CUDA kernel spinning about 10 ms returns at once; benchmark must synchronise
    the device before reading the clock, so its median is at least half the kernel's own duration
    (measured with CUDA events), not the microseconds of the launch.

    Hint: torch.cuda.synchronize() before each reading of the clock.
    """
    got = student.run(scenarios.benchmark_cuda_sleep, cycles=20_000_000, warmup=2, rep=5)
    assert got["benchmark"] >= 0.5 * got["kernel"], \
        f"benchmark gave {got['benchmark']:.3g} s for a kernel that runs {got['kernel']:.3g} s: no synchronisation?"


@pytest.mark.points(2)
@pytest.mark.task("measure.profile_top_ops")
def test_profile_top_ops_ranks_ops_by_self_time_with_their_call_counts(student):
    """Two 1024² matmuls, then small adds (3 calls), muls (2) and exps (1): the first entry is
    ("aten::mm", self µs, 2), self times never increase down the list, each op appears once with its calls."""
    got = student.run(scenarios.profile_program, matmuls=2, size=1024, ops={"add": 3, "mul": 2, "exp": 1}, k=50)
    assert type(got) is list and got, f"expected a non-empty list of (name, self_time_us, calls), got {got!r}"
    for entry in got:
        assert type(entry) is tuple and len(entry) == 3 and type(entry[0]) is str and type(entry[1]) is float \
            and type(entry[2]) is int, f"each entry must be a tuple (str, float, int), got {entry!r}"
    names = [name for name, _, _ in got]
    assert len(set(names)) == len(names), f"each op must appear once: {names}"
    assert got[0][0] == "aten::mm" and got[0][2] == 2, f"expected the two matmuls first, got {got[0]}"
    times = [time for _, time, _ in got]
    assert times == sorted(times, reverse=True), f"self times must not increase down the list: {times}"
    calls = {name: count for name, _, count in got}
    assert {op: calls.get(op) for op in ("aten::add", "aten::mul", "aten::exp")} == \
        {"aten::add": 3, "aten::mul": 2, "aten::exp": 1}, f"call counts: {calls}"


@pytest.mark.points(1)
@pytest.mark.task("measure.profile_top_ops")
def test_profile_top_ops_returns_at_most_k_ops(student):
    """With k=2 the list has exactly two entries, the matmul first."""
    got = student.run(scenarios.profile_program, matmuls=1, size=1024, ops={"add": 2, "neg": 1}, k=2)
    assert type(got) is list and len(got) == 2, f"expected 2 entries, got {got!r}"
    assert got[0][0] == "aten::mm", f"expected the matmul first, got {got}"


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.parametrize("function, kwargs, name", [
    pytest.param("benchmark", {"warmup": -1, "rep": 5}, "warmup", marks=pytest.mark.task("measure.benchmark"),
                 id="benchmark-warmup=-1"),
    pytest.param("benchmark", {"warmup": 1, "rep": 0}, "rep", marks=pytest.mark.task("measure.benchmark"),
                 id="benchmark-rep=0"),
    pytest.param("profile_top_ops", {"k": 0}, "k", marks=pytest.mark.task("measure.profile_top_ops"),
                 id="profile_top_ops-k=0"),
])
def test_measure_functions_reject_invalid_counts(student, function, kwargs, name):
    """warmup below 0, rep below 1 or k below 1 raise ValueError naming the argument."""
    got = student.run(scenarios.measure_error, function=function, kwargs=kwargs)
    named = re.search(rf"\b{name}\b", got.removeprefix("ValueError: "))  # the name as a word, not a letter of one
    assert got.startswith("ValueError") and named, f"expected a ValueError naming {name!r}, got: {got}"
