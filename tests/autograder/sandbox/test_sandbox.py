"""The sandboxed worker, attacked directly: what student code can and cannot do to the grader.

One worker serves the module (restarted after each crash, as when grading). The tricks live in a
small package `tricks` of the fake submission. Where bubblewrap cannot run on this machine, the tests
of what it hides are skipped and the protections report says so.
"""

import os
import socket
import time
from pathlib import Path

import pytest
import torch

from autograder.sandbox import policy
from autograder.sandbox.process import RemoteStudent, StudentError, Worker, WorkerError
from autograder.sandbox.staging import build_lib
from tests.autograder.sandbox import fake

ROOT = Path(__file__).resolve().parents[3]
MARK = "987.654321"  # an argument no other process on this machine has

TRICKS = f'''
import os, subprocess, sys, time

def add(a, b):
    return a + b

def spin():
    while True:
        pass

def exit_zero():
    os._exit(0)

def exit_code():
    os._exit(3)

def abort():
    os.abort()

def raise_system_exit():
    sys.exit(0)

def fork_bomb():
    count = 0
    try:
        while True:
            if os.fork() == 0:
                time.sleep(600)
                os._exit(0)
            count += 1
    except OSError:
        return count

def orphan():
    subprocess.Popen(["sleep", "{MARK}"], start_new_session=True)
    return True

def memory_bomb():
    return len(bytearray(64 << 30))

def flood():
    while True:
        sys.stdout.write("x" * 65536)

def can_see(paths):
    return {{p: os.path.exists(p) for p in paths}}

def listing(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else None

def write_outside(path):
    with open(path, "w") as f:
        f.write("forged")
    return True

def network():
    import socket
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2)
        return "connected"
    except OSError as exc:
        return type(exc).__name__

def not_plain():
    class AlwaysEqual(int):
        def __eq__(self, other):
            return True
    return AlwaysEqual(1)

def tensor_subclass():
    import torch
    class Sneaky(torch.Tensor):
        pass
    return torch.zeros(2).as_subclass(Sneaky)

def dispatch_mode():
    """A TorchDispatchMode of the submission's, entered: what it imported (its sum is right either way)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counting(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {{}}))

    with Counting():
        total = float((torch.ones(3) + 1).sum())
    return [total, "torch._dynamo" in sys.modules, "sympy" in sys.modules]

def value_error():
    raise ValueError("n must be positive")

def lying_error():
    class Weird(Exception):
        def __str__(self):
            raise RuntimeError("no message for you")
    raise Weird()
'''


@pytest.fixture(scope="module")
def protections():
    return policy.detect("auto", policy.Limits(call_timeout=5, start_timeout=120))


@pytest.fixture(scope="module", params=["exec", "forked"])
def worker(request, tmp_path_factory, protections):
    """The worker as a single grading starts it (its own interpreter), and as a grading server does where it may
    (forked from the server's zygote: sandbox.forked); every attack below meets both."""
    if request.param == "forked":
        zygote = fake.zygote(tmp_path_factory.mktemp("zygote"), protections)
        handle = fake.forked_worker(zygote, "stage", "tricks", {"m": TRICKS}, protections)
        yield handle
        handle.stop()
        zygote.stop()
        return
    base = tmp_path_factory.mktemp("sandbox")
    handle = Worker(build_lib(base / "lib", []), fake.submission(base, "tricks", {"m": TRICKS}), base / "scratch",
                    protections, gpu=False)
    yield handle
    handle.stop()


@pytest.fixture
def student(worker):
    return RemoteStudent(worker, timeout=5)


def call(student, name, *args):
    return student.call(f"tricks.m:{name}", *args)


def leftovers() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and MARK in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def test_a_call_returns_plain_data(student):
    assert call(student, "add", 2, 3) == 5


def test_an_endless_loop_times_out_and_the_next_call_gets_a_fresh_worker(student, worker):
    assert call(student, "add", 1, 1) == 2  # its worker up, whichever test ran before (or none)
    starts = worker.starts
    with pytest.raises(WorkerError, match="timed out after 5 s"):
        call(student, "spin")
    assert call(student, "add", 1, 1) == 2 and worker.starts == starts + 1


@pytest.mark.parametrize("trick", ["exit_zero", "raise_system_exit"])
def test_exiting_early_fails_the_call_instead_of_passing(student, trick):
    with pytest.raises((WorkerError, StudentError)):
        call(student, trick)
    assert call(student, "add", 1, 2) == 3


def test_a_fork_bomb_is_capped_and_nothing_it_started_survives(student, worker, protections):
    if not protections.pids_cgroup and not protections.nproc_rlimit:
        pytest.skip("no process limit on this machine: " + protections.lines()[1])
    count = RemoteStudent(worker, timeout=60).call("tricks.m:fork_bomb")
    assert count < policy.MAX_PIDS
    worker.stop()
    assert call(student, "add", 1, 2) == 3


def eventually(condition, seconds: float = 30.0):
    """condition()'s first truthy value within `seconds` (polled), else its last value: process state takes
    its time to show on a busy machine."""
    deadline = time.monotonic() + seconds
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


def test_a_detached_child_is_killed_with_the_worker(student, worker):
    assert call(student, "orphan") is True
    assert eventually(leftovers), "the child should be running while the worker lives"
    worker.stop()
    assert eventually(lambda: leftovers() == []), f"still running after the worker stopped: {leftovers()}"


def test_a_memory_bomb_fails_with_memory_error(student):
    with pytest.raises(MemoryError):
        call(student, "memory_bomb")


def test_an_output_flood_is_capped_by_the_file_size_limit(student, worker):
    # Python ignores SIGXFSZ, so the write that crosses the limit raises OSError (EFBIG).
    with pytest.raises((StudentError, WorkerError), match="File too large|SIGXFSZ|timed out"):
        call(student, "flood")
    assert all(p.stat().st_size <= policy.Limits.file_size for p in worker.scratch.parent.glob("worker-*.log"))


def test_the_worker_cannot_see_the_repository_or_reach_the_network(student, protections):
    if not protections.bwrap:
        pytest.skip("bubblewrap is not active here: " + protections.lines()[0])
    hidden = [str(ROOT / "solutions"), str(ROOT / "autograder" / "suites"), str(ROOT / "Makefile"), "/etc/shadow"]
    assert call(student, "can_see", hidden) == {path: False for path in hidden}
    # The repository's folder exists only as the mount point of a virtual environment inside it.
    assert set(call(student, "listing", str(ROOT)) or []) <= {".venv"}
    assert call(student, "network") in ("OSError", "ConnectionRefusedError", "TimeoutError")


def test_the_worker_cannot_write_outside_its_scratch_folder(student, protections, tmp_path):
    if not protections.bwrap:
        pytest.skip("bubblewrap is not active here: " + protections.lines()[0])
    with pytest.raises(StudentError):
        call(student, "write_outside", "/sandbox/lib/autograder/model/wire.py")
    with pytest.raises(StudentError):
        call(student, "write_outside", str(tmp_path / "forged.json"))
    assert not (tmp_path / "forged.json").exists()


@pytest.mark.parametrize("trick", ["not_plain", "tensor_subclass"])
def test_objects_that_are_not_plain_data_are_refused(student, trick):
    with pytest.raises(StudentError, match="not plain data"):
        call(student, trick)


def test_a_dispatch_mode_in_the_worker_imports_no_dynamo(student, worker):
    """The worker's dispatch modes skip the 1.4 CPU seconds of importing torch._dynamo (and sympy, Triton)
    that torch's wrapper of __torch_dispatch__ spends at a mode's first dispatch (kernels.device). A forked
    worker has them already: its zygote imported them once, for every worker (sandbox.zygote.WARM_MODULES)."""
    forked = worker.zygote is not None
    assert call(student, "dispatch_mode") == [6.0, forked, forked]


def test_student_exceptions_arrive_as_their_builtin_type_and_odd_ones_do_not_crash(student):
    with pytest.raises(ValueError, match="n must be positive"):
        call(student, "value_error")
    with pytest.raises(StudentError, match="could not be read"):
        call(student, "lying_error")


def test_the_protections_are_stated_in_words(protections):
    lines = protections.lines()
    assert lines[0].startswith("bubblewrap: ")
    assert any(line.startswith("timeout: 5 s") for line in lines)


def test_a_function_that_timed_out_twice_is_not_called_again(worker):
    student = RemoteStudent(worker, timeout=2)
    for _ in range(2):
        with pytest.raises(WorkerError, match="timed out"):
            call(student, "spin")
    with pytest.raises(WorkerError, match="not run: tricks.m:spin already timed out"):
        call(student, "spin")
    assert call(student, "add", 1, 2) == 3


def test_after_five_failures_in_a_row_no_call_runs(worker):
    student = RemoteStudent(worker, timeout=30)
    for name in ("exit_zero", "exit_zero", "exit_code", "exit_code", "abort"):
        with pytest.raises(WorkerError, match="during the call"):
            call(student, name)
    with pytest.raises(WorkerError, match="the last 5 calls"):
        call(student, "add", 1, 2)


def test_the_time_budget_bounds_a_submission(worker):
    student = RemoteStudent(worker, timeout=2, budget=3)
    with pytest.raises(WorkerError, match="timed out after 2 s"):
        call(student, "spin")
    with pytest.raises(WorkerError, match=r"timed out after [01](\.\d+)? s"):
        call(student, "spin")
    with pytest.raises(WorkerError, match="used up its grading time budget"):
        call(student, "add", 1, 2)
