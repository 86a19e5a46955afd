"""The student Makefile's install (autograder/package/templates/student.mk): one line on the screen for the whole
install, pip's output in a log, and a failure that says so and shows the log's end. Run with a stand-in for the
virtual environment's python, so that nothing is downloaded."""

import os
import shutil
import subprocess
from pathlib import Path

from autograder.package.release import TEMPLATES
from tests.autograder.package.conftest import clean_env

# A venv's python that pip-installs noisily, as pip does without -q, and fails when asked to.
FAKE_PYTHON = """#!/bin/sh
echo "python $*" >> "$(dirname "$0")/calls"
for line in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do
  echo "Collecting something-$line (from -r requirements.lock)"
done
if [ -n "$FAKE_PIP_FAILS" ]; then echo "ERROR: No matching distribution found for torch==2.13.0" >&2; exit 1; fi
"""


def student(tmp_path: Path) -> Path:
    folder = tmp_path / "student"
    folder.mkdir()
    shutil.copyfile(TEMPLATES / "student.mk", folder / "Makefile")
    (folder / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (folder / "requirements.lock").write_text("six==1.17.0 --hash=sha256:0\n")
    venv = folder / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(FAKE_PYTHON)
    (venv / "python").chmod(0o755)
    return folder


def install(folder: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "install"], cwd=folder, capture_output=True, text=True,
                          env=clean_env(**env), timeout=60)


def test_the_install_shows_one_line_and_keeps_pips_output_in_its_log(tmp_path):
    folder = student(tmp_path)
    done = install(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = (done.stdout + done.stderr).splitlines()
    assert len(shown) == 1, shown
    assert shown[0].startswith("Installing torch and the course's locked packages into .venv")
    assert "pip's log: .venv/install.log" in shown[0]
    log = (folder / ".venv" / "install.log").read_text()
    assert log.count("Collecting something-") == 60  # both installs, in the log
    calls = (folder / ".venv" / "bin" / "calls").read_text().splitlines()
    assert calls[0].startswith("python -m pip install --quiet") and calls[0].endswith("torch==2.13.0")
    assert calls[1].endswith("--require-hashes -r requirements.lock")
    again = install(folder)
    calls = (folder / ".venv" / "bin" / "calls").read_text().splitlines()
    assert "Installing" not in again.stdout and len(calls) == 2, "a second run installs nothing"


def test_a_failed_install_says_so_names_the_log_and_shows_its_end(tmp_path):
    folder = student(tmp_path)
    done = install(folder, FAKE_PIP_FAILS="1")
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "make: installing into .venv failed; the end of pip's log, .venv/install.log:" in out
    assert "ERROR: No matching distribution found for torch==2.13.0" in out
    assert out.count("Collecting something-") <= 20  # the end of the log, not all of it
    assert not list((folder / ".venv").glob(".installed-*")), "a failed install leaves no stamp"
    assert os.path.exists(folder / ".venv" / "install.log")
