"""Budgets in CPU seconds (autograder/sandbox/cputime.py), observed from outside the submission.

A call is judged by what the kernel counted of its worker's CPU (a cgroup), and the machine's load by
the grader's own reading of its cores; nothing the submission's processes report about themselves
(their /proc counters, their threads' run-queue delay) decides a verdict. The attacks below hid CPU
from the old per-process counters (children reaped by the kernel, processes that are always runnable
and never run) and so turned a deserved timeout into a pass or into "grader overloaded".

Load is made, not hoped for: busy processes on every core the grader may use. Each test stops by itself.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.harness.student import GraderOverloaded
from autograder.sandbox import cgroups
from autograder.sandbox.cgroups import WorkerCgroup
from autograder.sandbox import cputime
from autograder.sandbox.cputime import Machine, Meter, backstop, descendants, process_cpu, run_delay
from autograder.sandbox.process import RemoteStudent, Worker, WorkerError
from tests.autograder.sandbox import fake

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists() or not hasattr(os, "sched_getaffinity"),
                                reason="needs Linux's /proc/stat and CPU affinity")
CPU_COUNTED = pytest.mark.skipif(not cgroups.supported()[1],
                                 reason="no cgroup can be made here (the grader is not root and has no delegated "
                                        "cgroup), so no CPU is counted from outside the worker")
CORES = sorted(os.sched_getaffinity(0))

WORK = '''
import os
import signal
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


def _children(seconds_each, reap):
    """Children that each compute for `seconds_each` of CPU and exit, one after another, for ever."""
    while True:
        pid = os.fork()
        if pid == 0:
            started = time.process_time()
            while time.process_time() - started < seconds_each:
                pass
            os._exit(0)
        if reap:
            os.waitpid(pid, 0)
        else:
            time.sleep(seconds_each)


def hidden_children():
    """The parent ignores SIGCHLD: the kernel reaps each child, and no /proc counter keeps its CPU."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    _children(0.3, reap=False)


def visible_children():
    _children(0.3, reap=True)


def _starved_spinners(core):
    """Three processes pinned to `core` at the lowest priority: where anything else runs there, they are
    always runnable and almost never run, and their run-queue delay grows by about three seconds a second."""
    for _ in range(3):
        if os.fork() == 0:
            os.sched_setaffinity(0, {core})
            os.nice(19)
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            while True:
                pass


def starved_spinners(core):
    """The spinners, while the call sleeps."""
    _starved_spinners(core)
    time.sleep(3600)


def hidden_work(core):
    """6 s of computing in children the kernel reaps (two at a time), beside the spinners; then an answer."""
    _starved_spinners(core)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for _ in range(10):
        for _ in range(2):
            if os.fork() == 0:
                started = time.process_time()
                while time.process_time() - started < 0.3:
                    pass
                os._exit(0)
        time.sleep(0.35)
    return 42
'''


def hogs() -> list[subprocess.Popen]:
    """Three busy processes per core this process may use: any other process gets about a quarter of a core."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3 * len(CORES))]


def hog_on(core: int) -> subprocess.Popen:
    """One busy process of normal priority pinned to `core`."""
    return subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"])


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


@pytest.fixture
def grouped():
    """Start `python -c code` inside a cgroup of its own; yields (start, cgroup); everything is killed after."""
    made: list[tuple[subprocess.Popen, WorkerCgroup]] = []

    def start(code: str) -> tuple[subprocess.Popen, WorkerCgroup]:
        group = WorkerCgroup.create(64)
        assert group is not None and group.cpu is not None
        join = ";".join(f"open({p!r}, 'w').write(str(os.getpid()))" for p in group.procs_files)
        process = subprocess.Popen([sys.executable, "-c", f"import os; {join}\n{code}"])
        made.append((process, group))
        return process, group

    yield start
    for process, group in made:
        group.remove()
        process.kill()
        process.wait()


def test_the_backstop_is_generous():
    assert backstop(15) == 75 and backstop(300) == 1200


def test_the_machine_reading_counts_the_time_no_core_was_free(tmp_path, monkeypatch):
    """/proc/stat's idle and iowait ticks of the cores this process may use: over 10 s of wall clock, cores that
    were idle 3 s and 4 s leave at least 3 s in which no core was free; other cores do not count."""
    monkeypatch.setattr(cputime, "PROC", tmp_path)

    def stat(idle: dict[int, int]) -> None:
        ticks = cputime.TICKS
        lines = ["cpu  1 2 3 4 5 6 7"] + [f"cpu{n} 100 0 50 {ticks * seconds} {ticks} 0 0" for n, seconds in idle.items()]
        (tmp_path / "stat").write_text("\n".join(lines) + "\n")

    stat({0: 100, 1: 200, 7: 0})
    machine = Machine(cpus={0, 1})
    stat({0: 103, 1: 204, 7: 9})
    assert machine.busy(10.0) == pytest.approx(3.0)
    assert machine.busy(5.0) == 0.0, "more idle time than wall clock: a core was always free"


def test_the_machine_reading_sees_every_core_taken_as_busy():
    busy = hogs()
    try:
        machine = Machine()
        time.sleep(1.5)
        assert machine.busy(time.monotonic() - machine.started) > 1.0, "every core taken: busy most of the time"
    finally:
        stop(busy)


@CPU_COUNTED
def test_a_busy_process_is_charged_its_cpu_and_stopped_at_its_budget(grouped):
    process, group = grouped("while True: pass")
    meter = Meter(group.cpu_seconds, budget=1.0, delay=lambda: run_delay(group.members()))
    while meter.verdict() is None:
        time.sleep(0.05)
    assert meter.last == "cpu" and meter.used.cpu >= 1.0 and meter.wall < 10


@CPU_COUNTED
def test_a_sleeping_process_is_stopped_as_idle_not_as_overloaded(grouped):
    process, group = grouped("import time; time.sleep(60)")
    meter = Meter(group.cpu_seconds, budget=1.0, delay=lambda: run_delay(group.members()))
    while meter.verdict() is None:
        time.sleep(0.05)
    assert meter.last == "idle" and meter.used.cpu < 0.5


@CPU_COUNTED
def test_a_starved_process_is_the_machines_load_never_a_verdict_on_the_code(grouped):
    """Every core taken by three busy processes: the process gets about a quarter of a core and the rest of
    the time is the machine's, so neither its CPU nor its idle time reaches the budget before 3 s."""
    busy = hogs()
    try:
        process, group = grouped("while True: pass")
        meter = Meter(group.cpu_seconds, budget=2.0, delay=lambda: run_delay(group.members()))
        while meter.verdict() is None and meter.wall < 3.0:
            time.sleep(0.05)
        assert meter.last is None, f"stopped as {meter.last} after {meter.wall:.1f} s"
        assert meter.used.cpu < 2.0 and meter.used.waiting > 1.0 and meter.idle < 1.0
    finally:
        stop(busy)


@CPU_COUNTED
def test_the_cgroup_keeps_the_cpu_of_children_the_kernel_reaped(grouped):
    """The parent ignores SIGCHLD: each child is gone without a trace in /proc, and in the cgroup's account."""
    code = ("import os, signal, time\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
            "for _ in range(4):\n    if os.fork() == 0:\n        s = time.process_time()\n"
            "        while time.process_time() - s < 0.3: pass\n        os._exit(0)\n    time.sleep(0.5)\n"
            "time.sleep(60)")
    process, group = grouped(code)
    deadline = time.monotonic() + 30
    # Until the four have run and ended (on a busy machine the last may still be running when 1.0 s is reached)
    while ((group.cpu_seconds() or 0.0) < 1.0 or len(group.members()) > 1) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group.cpu_seconds() >= 1.0, "the four children's 1.2 s are in the cgroup's account"
    assert process_cpu(descendants(process.pid)) < 0.5, "and in no counter of /proc: the hole the cgroup closes"


def test_process_cpu_counts_children_reaped_by_their_parent():
    process = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                                "subprocess.run([sys.executable, '-c', 'x = 0\\nfor i in range(30_000_000): x += i'])\n"
                                "time.sleep(30)"])
    try:
        deadline = time.monotonic() + 60
        while process_cpu(descendants(process.pid)) < 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert process_cpu(descendants(process.pid)) >= 0.5
    finally:
        stop([process])


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    handle = fake.worker(tmp_path_factory.mktemp("cputime"), "tricks", {"m": WORK}, call_timeout=3)
    yield handle
    handle.stop()


@pytest.fixture
def wall_worker(tmp_path):
    """A worker as a grader that can make no cgroup runs it: its calls are charged the wall clock."""
    handle = fake.worker(tmp_path, "tricks", {"m": WORK}, call_timeout=3)
    handle.protections = dataclasses.replace(handle.protections, cpu_cgroup=False)
    yield handle
    handle.stop()


@CPU_COUNTED
def test_a_call_within_its_cpu_budget_passes_on_a_loaded_machine(worker):
    """About 1.2 s of computing with a 3 s budget while every core is taken: some 4 s by the clock, which
    a wall-clock budget of 3 s would have failed."""
    assert worker.protections.cpu_cgroup
    student = RemoteStudent(worker, timeout=3)
    count = iterations_for(1.2)
    busy = hogs()
    try:
        started = time.monotonic()
        assert student.call("tricks.m:work", count) == sum(i * i for i in range(count))
        assert time.monotonic() - started > 3.0, "the load did not slow the call: the test proves nothing"
    finally:
        stop(busy)


def test_an_endless_loop_still_fails_on_a_loaded_machine(worker):
    student = RemoteStudent(worker, timeout=2)
    busy = hogs()
    try:
        with pytest.raises(WorkerError, match="timed out after 2 s of CPU time"):
            student.call("tricks.m:spin")
    finally:
        stop(busy)


def test_a_call_that_only_waits_fails_as_the_students(worker):
    """A sleep waits for no core: idle time, the student's, on a quiet machine as on a busy one."""
    student = RemoteStudent(worker, timeout=1)
    busy = hogs()
    try:
        with pytest.raises(WorkerError, match="without computing"):
            student.call("tricks.m:nap", 30)
    finally:
        stop(busy)


@CPU_COUNTED
@pytest.mark.parametrize("trick", ["visible_children", "hidden_children"])
def test_cpu_hidden_from_proc_fails_like_visible_cpu(worker, trick):
    """Children that compute 0.3 s each: waited for by their parent (their CPU in its counters), or reaped
    by the kernel because the parent ignores SIGCHLD (in no counter of /proc). The cgroup counts both, and
    both time out on CPU after 2 s. Before, the hidden ones were charged about nothing and ran until the
    backstop: "the grader was overloaded"."""
    student = RemoteStudent(worker, timeout=2)
    with pytest.raises(WorkerError, match="timed out after 2 s of CPU time") as caught:
        student.call(f"tricks.m:{trick}")
    assert not isinstance(caught.value, GraderOverloaded)


@pytest.fixture
def short_backstop(monkeypatch):
    """The backstop at 8 s of wall clock for a budget of 2 s: a call that reaches it is the grader's overload."""
    monkeypatch.setattr("autograder.sandbox.process.backstop", lambda budget: 8.0)
    monkeypatch.setattr("autograder.sandbox.cputime.backstop", lambda budget: 8.0)


@CPU_COUNTED
def test_processes_that_wait_for_a_core_without_running_are_not_the_machines_load(worker, short_backstop):
    """Three lowest-priority spinners on a core that a normal process keeps busy, while the call sleeps:
    their run-queue delay read as "waiting for a core" (about 3 s a second), idle time stayed near 0, and the
    call ended at the backstop as the grader's overload. The grader's own reading of the cores sees the other
    core free: the call was idle (or, where the spinners got a core after all, over its CPU), the student's."""
    core = CORES[0]
    hog = hog_on(core)
    try:
        with pytest.raises(WorkerError, match="without computing|of CPU time") as caught:
            RemoteStudent(worker, timeout=2).call("tricks.m:starved_spinners", core)
    finally:
        stop([hog])
    assert not isinstance(caught.value, GraderOverloaded)


@CPU_COUNTED
def test_hidden_cpu_beside_starved_spinners_does_not_pass(worker, short_backstop):
    """The two tricks together: 6 s of computing in children the kernel reaps, while the spinners keep
    "waiting" high so that idle time never reaches the 2 s budget; the call returned its answer and passed.
    Counted by the cgroup, it times out on CPU."""
    core = CORES[0]
    hog = hog_on(core)
    try:
        with pytest.raises(WorkerError, match="timed out after 2 s of CPU time"):
            RemoteStudent(worker, timeout=2).call("tricks.m:hidden_work", core)
    finally:
        stop([hog])


def test_a_call_the_backstop_stops_under_budget_is_overloaded_and_not_charged_as_a_failure(worker, monkeypatch):
    """The backstop shortened to 2 s of wall clock and every core taken: the call cannot use its CPU budget
    in time while the grader sees no free core, so it is the grader's overload, and the same function may be
    called again."""
    if not worker.protections.cpu_cgroup:
        pytest.skip("without a CPU account every call is charged the wall clock: no overload verdict")
    from autograder.sandbox import process

    monkeypatch.setattr(process, "backstop", lambda budget: 2.0)
    monkeypatch.setattr("autograder.sandbox.cputime.backstop", lambda budget: 2.0)
    student = RemoteStudent(worker, timeout=30)
    worker.ready()
    busy = hogs()
    try:
        with pytest.raises(GraderOverloaded, match="overloaded"):
            student.call("tricks.m:work", iterations_for(20))
    finally:
        stop(busy)
    assert student.failures == {} and student.in_a_row == 0
    assert student.call("tricks.m:nap", 0) == 0


@pytest.mark.parametrize("trick, args", [("hidden_children", ()), ("spin", ()), ("hidden_work", (CORES[0],)),
                                         ("starved_spinners", (CORES[0],))])
def test_without_a_cgroup_the_wall_clock_is_charged_and_no_trick_escapes_it(wall_worker, trick, args):
    """Where no cgroup can be made, the call is charged its wall clock: hidden CPU, visible CPU and stalls
    all time out after the budget, and none is ever the grader's overload."""
    student = RemoteStudent(wall_worker, timeout=2)
    started = time.monotonic()
    with pytest.raises(WorkerError, match="by the clock") as caught:
        student.call(f"tricks.m:{trick}", *args)
    assert not isinstance(caught.value, GraderOverloaded)
    assert time.monotonic() - started < 30


def test_without_a_cgroup_a_short_call_still_passes(wall_worker):
    assert RemoteStudent(wall_worker, timeout=3).call("tricks.m:nap", 0.2) == 0.2


def test_a_call_charged_its_wall_clock_reads_neither_its_wait_for_a_core_nor_the_machine():
    """Without a CPU account no verdict asks how long the call waited for a core or how busy the machine was:
    neither is read (the wait, there, is a scan of every process in /proc, at every call)."""
    read = []
    meter = Meter(None, budget=0.05, delay=lambda: read.append("delay") or 0.0)
    meter.verdict()  # whatever it says so soon (a loaded machine may stall this process past the budget)
    time.sleep(0.06)
    assert meter.verdict() == "wall" and meter.charged == meter.wall >= 0.05
    assert read == [] and meter.machine is None
    counted = Meter(lambda: 0.0, budget=1.0, delay=lambda: read.append("delay") or 0.0)
    counted.verdict()
    assert read == ["delay", "delay"] and counted.machine is not None  # with a CPU account, both are read


def test_the_build_scenarios_carry_the_build_budget():
    from autograder.suites.flash_attention import scenarios as flash
    from autograder.suites.gpu_kernels import scenarios as kernels_scenarios
    from kernels.crosscompile import BUILD_CPU_SECONDS

    assert flash.triton_gpu_builds.cpu_budget == BUILD_CPU_SECONDS
    assert kernels_scenarios.gpu_builds.cpu_budget == BUILD_CPU_SECONDS
