"""The Makefile's `make grade SUBMISSION=path`: one submission, one grade, in a folder of its own.

It grades into GRADED_ONE/<name> (build/grade/<name>), never into the batch's GRADES (build/grades), whose
files the gradebook owns. The commands are read with `make -n` (printed, not run); PYTHON is given, so the
install step has nothing to do. The guard that refuses overlapping folders is run for real, with the install
and sandbox steps skipped (`-o`) and PYTHON=true, so that even a Makefile without the guard grades nothing.
"""

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def make(*args: str) -> subprocess.CompletedProcess:
    """`make ARGS` in the repository, apart from any make running this test and from GRADES etc. in the
    environment (a `make test GRADES=...` passes its variables down through MAKEFLAGS)."""
    drop = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GRADES", "GRADED_ONE", "SUBMISSION", "PYTHON"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)


def grade_out(*args: str) -> str:
    """The --out of the grade command `make -n grade ARGS` prints."""
    done = make("-n", "grade", "PYTHON=python", *args)
    assert done.returncode == 0, done.stderr
    assert "pip install" not in done.stdout  # nothing to install with PYTHON given (and -n runs nothing)
    [line] = [line for line in done.stdout.splitlines() if "-m autograder grade " in line]
    words = shlex.split(line)
    return words[words.index("--out") + 1]


@pytest.mark.parametrize("submission, name", [("some/where/alice", "alice"), ("some/where/alice/", "alice"),
                                              ("some/where/alice.zip", "alice"),
                                              ("some/where/alice.smith", "alice.smith")])
def test_make_grade_of_one_submission_writes_build_grade_name_not_the_batch_folder(submission, name):
    out = grade_out(f"SUBMISSION={submission}")
    assert out == f"build/grade/{name}"
    assert not (out + "/").startswith("build/grades/")  # GRADES' default


def test_make_grade_follows_graded_one_and_grades(tmp_path):
    out = grade_out("SUBMISSION=x/bob.zip", f"GRADES={tmp_path}/batch", f"GRADED_ONE={tmp_path}/one")
    assert out == f"{tmp_path}/one/bob"


@pytest.mark.parametrize("graded_one, grades, submission", [
    ("build/grades", "build/grades", "alice"),  # GRADED_ONE is GRADES
    ("build/grades/submissions", "build/grades", "alice"),  # inside it: the batch's own folder of alice
    ("build", "build/grades", "grades.zip"),  # holds it: build/grades would be this submission's folder
])
def test_make_grade_refuses_a_graded_one_that_overlaps_grades(graded_one, grades, submission):
    done = make("-o", "install", "-o", "sandbox-tools", "grade", "PYTHON=true", f"SUBMISSION={submission}",
                f"GRADES={grades}", f"GRADED_ONE={graded_one}")
    assert done.returncode != 0
    assert f"GRADED_ONE={graded_one}" in done.stderr and f"overlaps the batch's GRADES={grades}" in done.stderr


def test_make_grade_runs_with_separate_folders():
    """The guard lets the usual folders through (PYTHON=true: the grade command does nothing)."""
    done = make("-o", "install", "-o", "sandbox-tools", "grade", "PYTHON=true", "SUBMISSION=alice",
                "GRADES=build/grades", "GRADED_ONE=build/grade")
    assert done.returncode == 0, done.stderr
