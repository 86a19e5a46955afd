"""The Makefile's `make grade SUBMISSION=path` (one submission, one grade, in a folder of its own) and its install.

It grades into GRADED_ONE/<name> (build/grade/<name>), never into the batch's GRADES (build/grades), whose
files the gradebook owns. The commands are read with `make -n` (printed, not run); PYTHON is given, so the
install step has nothing to do. The guard that refuses overlapping folders is run for real, with the install
and sandbox steps skipped (`-o`) and PYTHON=true, so that even a Makefile without the guard grades nothing.
The install is read with `make -n` and `make -q` in a folder holding a copy of the Makefile, pyproject.toml
and the lock file.
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


# The install: torch first, then the lock with its hashes; a stamp named after pyproject.toml and the lock.

def make_in(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """`make ARGS` in a folder holding a copy of the Makefile, pyproject.toml and the lock (nothing is run with -n)."""
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES",
                                                            "PYTHON", "VENV", "TORCH_INDEX", "UPGRADE"}}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def copy(tmp_path) -> Path:
    for name in ("Makefile", "pyproject.toml", "requirements-instructor.lock"):
        shutil.copyfile(ROOT / name, tmp_path / name)
    return tmp_path


def test_install_puts_torch_first_then_every_other_dependency_from_the_lock_with_its_hashes(copy):
    plan = make_in(copy, "-n", "install").stdout.splitlines()
    pips = [line for line in plan if " -m pip install " in line]
    assert len(pips) == 1 and pips[0].endswith("pip install --quiet --disable-pip-version-check --no-compile "
                                               "torch==2.13.0")
    # the lock by uv or pip, each checking the hashes (tests/tooling/test_install_locked.py)
    locks = [line for line in plan if "scripts/install_locked.py" in line]
    assert len(locks) == 1 and locks[0].endswith("/bin/python scripts/install_locked.py requirements-instructor.lock")
    assert plan.index(pips[0]) < plan.index(locks[0])
    # neither writes bytecode; compileall writes all of the environment's, on every core, after both installs
    compiles = [index for index, line in enumerate(plan) if " -m compileall " in line]
    assert len(compiles) == 1 and plan.index(locks[0]) < compiles[0] < len(plan) - 1
    assert "-j 0" in plan[compiles[0]] and "purelib" in plan[compiles[0]]
    # into the environment, where the sandboxed workers read it, even under a caller's PYTHONPYCACHEPREFIX
    assert plan[compiles[0]].startswith("env -u PYTHONPYCACHEPREFIX ")
    assert plan[-1].startswith("touch .venv/.installed-")


def test_the_install_stamp_follows_pyproject_and_the_lock_not_file_times(copy):
    def stamp() -> str:
        return make_in(copy, "-n", "install").stdout.splitlines()[-1].removeprefix("touch ")

    first = stamp()
    (copy / first).parent.mkdir()
    (copy / first).touch()
    os.utime(copy / "requirements-instructor.lock")  # newer than the stamp, as in a fresh clone beside the venv
    assert make_in(copy, "-q", "install").returncode == 0  # up to date: nothing to install
    with open(copy / "requirements-instructor.lock", "a") as handle:
        handle.write("# changed\n")
    assert stamp() != first and make_in(copy, "-q", "install").returncode != 0
    (copy / "requirements-instructor.lock").write_bytes((ROOT / "requirements-instructor.lock").read_bytes())
    with open(copy / "pyproject.toml", "a") as handle:
        handle.write("# changed\n")
    assert stamp() != first


def test_make_lock_resolves_with_the_torch_pin_and_upgrades_only_when_asked():
    def command(*args: str) -> str:
        done = make("-n", "lock", "PYTHON=python", *args)
        assert done.returncode == 0, done.stderr
        return next(line for line in done.stdout.splitlines() if "autograder.package.lock" in line)

    assert shlex.split(command()) == ["python", "-m", "autograder.package.lock", "--torch", "torch==2.13.0"]
    assert shlex.split(command("UPGRADE=1"))[-1] == "--upgrade"
    assert "make lock" in make("help").stdout
