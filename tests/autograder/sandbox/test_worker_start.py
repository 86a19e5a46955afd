"""Whose failure a worker that does not start is: the grader's before the submission's code has run, the
submission's after, the machine's only where the grader itself saw the cores busy.

Seen on a GPU machine where bubblewrap was found on the grader's PATH but not on the worker's: every
test failed with "the worker exited with status 1 during the call (os._exit or sys.exit in student
code?)" and the reference scored 6 of 268. Now the worker runs the bubblewrap that was probed, and a
start that fails before any of the submission's code has run raises GraderFault: the submission is
graded again, and a second failure is a grader error, not a score.

The other way round (an outside review): the stubs plus a few lines in memory.py wrote a `kernels.py`
into the worker's scratch folder, its working directory, and ended the worker; under `python -m` the
working directory came first on sys.path, so the next worker imported that file before its ready signal
and hung, and every start timeout was read as "grader overloaded": the deserved zero became "not
graded". Now nothing the worker can write is on its import path (`-P`), and a start that fails after the
submission's code has run is the submission's, unless the grader saw the machine's cores busy.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.model.results import GRADER_FAULT
from autograder.harness.student import GraderOverloaded
from autograder.sandbox import bwrap, cputime, policy, process
from autograder.sandbox.process import GraderFault, RemoteStudent, Worker, WorkerError
from tests.autograder.sandbox import fake

ROOT = Path(__file__).resolve().parents[3]
REAL = shutil.which("bwrap")

pytestmark = pytest.mark.skipif(REAL is None or not policy.bwrap_status()[0],
                                reason="bubblewrap does not run here (install Debian's 'bubblewrap')")

# Passes the grader's probe (whose command is `true`) and fails to set up any other sandbox, as a
# bubblewrap without the rights it needs does.
BROKEN = """#!/bin/sh
for last; do :; done
if [ "$last" = true ]; then exec {real} "$@"; fi
echo "bwrap: setting up uid map: Permission denied" >&2
exit 1
"""

TRICKS = """
import os

def add(a, b):
    return a + b

def exit_code():
    os._exit(1)

def plant(name):
    \"\"\"Leave `name` in the working directory (the scratch folder): a module that hangs when imported.\"\"\"
    with open(name, "w") as f:
        f.write("import os, time\\nos.unlink(__file__)\\ntime.sleep(3600)\\n")
    os._exit(0)

def where():
    import sys
    return [os.getcwd(), *sys.path]
"""


@pytest.fixture
def bin_dir(tmp_path, monkeypatch):
    """A folder put first on PATH, with the probe's cache emptied before and after."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    policy.bwrap_status.cache_clear()
    yield folder
    monkeypatch.undo()
    policy.bwrap_status.cache_clear()


def make_worker(base: Path) -> Worker:
    return fake.worker(base, "tricks", {"m": TRICKS}, mode="bwrap")


def test_the_worker_runs_the_bubblewrap_that_was_probed(bin_dir, tmp_path):
    (bin_dir / "bwrap").symlink_to(REAL)
    command = bwrap.bwrap_command(tmp_path, tmp_path, tmp_path, {}, gpu=False)
    assert command[0] == str(bin_dir / "bwrap"), "the worker's PATH need not hold the folder the probe found"
    worker = make_worker(tmp_path / "w")
    try:
        assert RemoteStudent(worker, timeout=5).call("tricks.m:add", 2, 3) == 5
    finally:
        worker.stop()


def test_a_sandbox_that_cannot_start_is_the_graders_fault(bin_dir, tmp_path):
    (bin_dir / "bwrap").write_text(BROKEN.format(real=REAL))
    (bin_dir / "bwrap").chmod(0o755)
    assert policy.bwrap_status()[0], "the broken bubblewrap must pass the probe, as the real failure did"
    worker = make_worker(tmp_path / "w")
    student = RemoteStudent(worker, timeout=5)
    try:
        with pytest.raises(GraderFault, match=GRADER_FAULT) as caught:
            student.call("tricks.m:add", 2, 3)
        assert "Permission denied" in str(caught.value), "the message carries what the sandbox said"
        assert "os._exit" not in str(caught.value), "never blamed on the student's code"
        assert isinstance(caught.value, GraderOverloaded), "so the plugin marks it the grader's, not a failure"
        starts = worker.starts
        # The next calls fail the same way at once: no start is tried again for each test of the grading.
        for _ in range(3):
            with pytest.raises(GraderFault, match="Permission denied"):
                student.call("tricks.m:add", 2, 3)
        assert worker.starts == starts
    finally:
        worker.stop()


def test_a_worker_that_the_student_ends_is_still_the_students(tmp_path):
    """The attack: a call that exits the worker must not pass for the grader's fault (no grade is better
    for a failing student than a zero), and neither must the restarted worker's start."""
    policy.bwrap_status.cache_clear()
    worker = make_worker(tmp_path / "w")
    student = RemoteStudent(worker, timeout=5)
    try:
        with pytest.raises(WorkerError, match="during the call") as caught:
            student.call("tricks.m:exit_code")
        assert not isinstance(caught.value, GraderOverloaded)
        assert student.call("tricks.m:add", 1, 1) == 2, "the next call gets a new worker"
    finally:
        worker.stop()


def test_grading_with_a_broken_sandbox_is_a_grader_error_not_a_score(bin_dir, tmp_path):
    """End to end: `autograder grade` of the reference where bubblewrap passes its probe and then fails
    to start every worker gives no score, and says that the grader, not the submission, failed."""
    (bin_dir / "bwrap").write_text(BROKEN.format(real=REAL))
    (bin_dir / "bwrap").chmod(0o755)
    submission = tmp_path / "alice"
    shutil.copytree(ROOT / "solutions" / "resource_accounting", submission / "resource_accounting",
                    ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submission), "--assignment",
                           "resource_accounting", "--select", "test_flops", "--out", str(out)],
                          cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=600)
    said = done.stdout + done.stderr
    assert "grader fault" in said and "Permission denied" in said, said[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert not [t for t in report["tests"] if t["status"] == "failed"], "no test is recorded as the student's failure"
    assert not (out / "results.json").exists(), "no score for Gradescope: a failed run, never a 0"


@pytest.mark.parametrize("module", ["kernels.py", "torch.py"])
def test_a_module_left_in_the_scratch_folder_is_never_imported_by_the_next_worker(tmp_path, module):
    """The review's trick at the level of one worker: a call plants a module that hangs on import and ends
    the worker; the next worker starts as if nothing were there, and the next call is answered."""
    policy.bwrap_status.cache_clear()
    worker = fake.worker(tmp_path / "w", "tricks", {"m": TRICKS})
    student = RemoteStudent(worker, timeout=5)
    try:
        cwd, *path = student.call("tricks.m:where")
        assert cwd not in path and "" not in path and "." not in path, "the working directory is on sys.path"
        with pytest.raises(WorkerError, match="during the call"):
            student.call("tricks.m:plant", module)
        assert student.call("tricks.m:add", 2, 3) == 5, "the next worker imported the planted module"
    finally:
        worker.stop()


class IdleMachine(cputime.Machine):
    """The grader's reading of a machine whose cores were never all busy (the attribution is what is tested
    here; the reading itself is tested in test_cputime.py)."""

    def busy(self, wall: float) -> float:
        return 0.0


def test_a_worker_that_cannot_start_after_the_submissions_code_ran_is_the_submissions(tmp_path, monkeypatch):
    """A start that times out on an idle machine: before any call it is the grader's fault (nothing of the
    submission had run), after a call it is the submission's. The timeout is made real by a start limit too
    short for Python and torch to boot."""
    policy.bwrap_status.cache_clear()
    monkeypatch.setattr(process, "Machine", IdleMachine)
    worker = fake.worker(tmp_path / "w", "tricks", {"m": TRICKS})
    quick = dataclasses.replace(worker.protections.limits, start_timeout=0.3)
    worker.protections = dataclasses.replace(worker.protections, limits=quick)
    try:
        with pytest.raises(GraderFault, match=GRADER_FAULT):
            RemoteStudent(worker, timeout=5).call("tricks.m:add", 1, 1)
    finally:
        worker.stop()

    worker = fake.worker(tmp_path / "v", "tricks", {"m": TRICKS})
    student = RemoteStudent(worker, timeout=5)
    try:
        assert student.call("tricks.m:add", 1, 1) == 2
        worker.protections = dataclasses.replace(worker.protections, limits=quick)
        with pytest.raises(WorkerError, match="during the call"):
            student.call("tricks.m:exit_code")
        with pytest.raises(WorkerError, match="could not start again after your code had run") as caught:
            student.call("tricks.m:add", 1, 1)
        assert not isinstance(caught.value, GraderOverloaded), "a deserved failure, not the machine's"
    finally:
        worker.stop()


MEMORY_TRICK = """

import os as _os
if not _os.path.exists("kernels.py"):
    with open("kernels.py", "w") as _f:
        _f.write("import os, time\\nos.unlink(__file__)\\ntime.sleep(3600)\\n")
    _os._exit(0)
"""


def test_the_stubs_with_a_planted_worker_module_score_zero_not_not_graded(tmp_path):
    """End to end, the review's submission: resource_accounting's stubs, and memory.py that on its first
    import plants `kernels.py` in the scratch folder and ends the worker. Before: "attempt 1/2: the grader
    was overloaded", "the grader failed on this submission", exit 1, results.json not graded. Now: graded,
    zero points, exit 0, like the same stubs without the trick."""
    policy.bwrap_status.cache_clear()
    submission = tmp_path / "mallory"
    shutil.copytree(ROOT / "assignments" / "resource_accounting", submission / "resource_accounting",
                    ignore=shutil.ignore_patterns("__pycache__", "*.md"))
    memory = submission / "resource_accounting" / "memory.py"
    memory.write_text(memory.read_text() + MEMORY_TRICK)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submission), "--assignment",
                           "resource_accounting", "--select", "test_memory", "--timeout", "20", "--out", str(out)],
                          cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=600)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "overloaded" not in said and "grader fault" not in said, said[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["tests"] and not report["overloaded"] and not report["not_gradable"]
    assert sum(t["points"] for t in report["tests"]) == 0
