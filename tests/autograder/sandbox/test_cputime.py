"""Budgets in CPU seconds (autograder/sandbox/cputime.py): a call is judged by what its code consumed.

The load is made, not hoped for: busy processes pinned to the same core as the code under test, so that
the code waits for that core whatever else the machine runs. Each test stops by itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.harness.student import GraderOverloaded
from autograder.sandbox.cputime import Meter, backstop, descendants, usage
from autograder.sandbox.process import RemoteStudent, Worker, WorkerError
from tests.autograder.sandbox import fake

pytestmark = pytest.mark.skipif(not Path("/proc/self/schedstat").exists() or not hasattr(os, "sched_setaffinity"),
                                reason="needs Linux's /proc schedstat and CPU affinity")
CORE = {0}
SPIN = "import os; os.sched_setaffinity(0, {%d})\nwhile True: pass" % min(CORE)

WORK = '''
import os
import time


def work(iterations):
    """A fixed amount of computing: the same CPU time on any load."""
    total = 0
    for i in range(iterations):
        total += i * i
    return total


def nap(seconds):
    time.sleep(seconds)
    return seconds


def spin():
    while True:
        pass
'''


def hogs(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.kill()
        process.wait()


def iterations_for(cpu_seconds: float) -> int:
    """Iterations of `work` that take about `cpu_seconds` of CPU here."""
    count, started = 2_000_000, time.process_time()
    total = 0
    for i in range(count):
        total += i * i
    return int(count * cpu_seconds / max(time.process_time() - started, 1e-3))


def test_the_backstop_is_generous():
    assert backstop(15) == 75 and backstop(300) == 1200


def test_a_busy_process_is_charged_its_cpu_and_stopped_at_its_budget():
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        meter = Meter(lambda: descendants(process.pid), budget=1.0)
        while meter.verdict() is None:
            time.sleep(0.05)
        assert meter.last == "cpu" and meter.used.cpu >= 1.0 and meter.wall < 10
    finally:
        stop([process])


def test_a_sleeping_process_is_stopped_as_idle_not_as_overloaded():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        meter = Meter(lambda: descendants(process.pid), budget=1.0)
        while meter.verdict() is None:
            time.sleep(0.05)
        assert meter.last == "idle" and meter.used.cpu < 0.5
    finally:
        stop([process])


def test_a_starved_process_is_the_machines_overload_never_a_verdict_on_the_code():
    """Three busy processes on its core: it gets about a quarter of it, waits the rest, and the backstop
    comes before its CPU budget is used: overloaded."""
    busy = hogs(3)
    process = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        meter = Meter(lambda: descendants(process.pid), budget=2.0)
        meter_backstop = 3.0
        while meter.verdict() is None and meter.wall < meter_backstop:
            time.sleep(0.05)
        assert meter.last is None, f"stopped as {meter.last} after {meter.wall:.1f} s"
        assert meter.used.cpu < 2.0 and meter.used.waiting > 1.0 and meter.idle < 1.0
    finally:
        stop(busy + [process])


def test_usage_counts_children_reaped_during_a_call():
    process = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                                "subprocess.run([sys.executable, '-c', 'x = 0\\nfor i in range(30_000_000): x += i'])\n"
                                "time.sleep(30)"])
    try:
        deadline = time.monotonic() + 60
        while usage(descendants(process.pid)).cpu < 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert usage(descendants(process.pid)).cpu >= 0.5
    finally:
        stop([process])


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    handle = fake.worker(tmp_path_factory.mktemp("cputime"), "tricks", {"m": WORK}, call_timeout=3)
    yield handle
    handle.stop()


def pinned(worker: Worker) -> None:
    """The worker's processes (and what they start) on the busy core only."""
    for pid in worker.ready().tree():
        try:
            os.sched_setaffinity(pid, CORE)
        except OSError:
            pass


def test_a_call_within_its_cpu_budget_passes_on_a_loaded_machine(worker):
    """About 1.2 s of computing with a 3 s budget, beside three busy processes on its core: some 5 s by
    the clock, which a wall-clock budget of 3 s would have failed."""
    student = RemoteStudent(worker, timeout=3)
    pinned(worker)
    count = iterations_for(1.2)
    busy = hogs(3)
    try:
        started = time.monotonic()
        assert student.call("tricks.m:work", count) == sum(i * i for i in range(count))
        assert time.monotonic() - started > 3.0, "the load did not slow the call: the test proves nothing"
    finally:
        stop(busy)


def test_an_endless_loop_still_fails_on_a_loaded_machine(worker):
    student = RemoteStudent(worker, timeout=2)
    pinned(worker)
    busy = hogs(2)
    try:
        with pytest.raises(WorkerError, match="timed out after 2 s of CPU time"):
            student.call("tricks.m:spin")
    finally:
        stop(busy)


def test_a_call_that_only_waits_fails_as_the_students(worker):
    student = RemoteStudent(worker, timeout=1)
    with pytest.raises(WorkerError, match="without computing"):
        student.call("tricks.m:nap", 30)


def test_a_call_the_backstop_stops_under_budget_is_overloaded_and_not_charged_as_a_failure(worker, monkeypatch):
    """The backstop shortened to 2 s of wall clock and the worker's core made busy: the call cannot use its
    CPU budget in time, so it is the grader's overload, and the same function may be called again."""
    from autograder.sandbox import process

    monkeypatch.setattr(process, "backstop", lambda budget: 2.0)
    monkeypatch.setattr("autograder.sandbox.cputime.backstop", lambda budget: 2.0)
    student = RemoteStudent(worker, timeout=30)
    pinned(worker)
    busy = hogs(3)
    try:
        with pytest.raises(GraderOverloaded, match="overloaded"):
            student.call("tricks.m:work", iterations_for(20))
    finally:
        stop(busy)
    assert student.failures == {} and student.in_a_row == 0
    assert student.call("tricks.m:nap", 0) == 0


def test_the_build_scenarios_carry_the_build_budget():
    from autograder.suites.flash_attention import scenarios as flash
    from autograder.suites.gpu_kernels import scenarios as kernels_scenarios
    from kernels.crosscompile import BUILD_CPU_SECONDS

    assert flash.triton_gpu_builds.cpu_budget == BUILD_CPU_SECONDS
    assert kernels_scenarios.gpu_builds.cpu_budget == BUILD_CPU_SECONDS
