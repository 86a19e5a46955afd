"""A worker that the grader's own sandbox cannot start is the grader's failure, never the student's.

Seen on a GPU machine where bubblewrap was found on the grader's PATH but not on the worker's: every
test failed with "the worker exited with status 1 during the call (os._exit or sys.exit in student
code?)" and the reference scored 6 of 268. Now the worker runs the bubblewrap that was probed, and a
first start that fails (before the ready signal, so before any call of the submission) raises
GraderFault: the submission is graded again, and a second failure is a grader error, not a score.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.model.results import GRADER_FAULT
from autograder.harness.student import GraderOverloaded
from autograder.sandbox import bwrap, policy
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
    try:
        with pytest.raises(GraderFault, match=GRADER_FAULT) as caught:
            RemoteStudent(worker, timeout=5).call("tricks.m:add", 2, 3)
        assert "Permission denied" in str(caught.value), "the message carries what the sandbox said"
        assert "os._exit" not in str(caught.value), "never blamed on the student's code"
        assert isinstance(caught.value, GraderOverloaded), "so the plugin marks it the grader's, not a failure"
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
    results = json.loads((out / "results.json").read_text())
    assert not [t for t in results.get("tests", []) if t.get("status") == "failed"], \
        "no test is recorded as the student's failure"
