"""The development container students on macOS and Windows open (.devcontainer/, VS Code's and Codespaces'
convention): its set-up is the release's own `make install`. Here its logic, with stand-ins for make, apt-get,
id and python3; `make test-devcontainer` (scripts/devcontainer_check.py) runs it for real, from nothing, in a
clean Debian root."""

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DEVCONTAINER = ROOT / ".devcontainer"


def test_devcontainer_json_runs_the_set_up_on_a_linux_python_the_course_allows():
    config = json.loads((DEVCONTAINER / "devcontainer.json").read_text())
    assert config["postCreateCommand"] == "sh .devcontainer/setup.sh" and (DEVCONTAINER / "setup.sh").is_file()
    image = re.fullmatch(r"python:(\d+)\.(\d+)-(\w+)", config["image"])
    assert image, f"{config['image']}: the official Python image of a Debian release, by its short name"
    needs = re.search(r">=\s*(\d+)\.(\d+)", tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                      ["requires-python"])
    assert (int(image[1]), int(image[2])) >= (int(needs[1]), int(needs[2]))
    interpreter = config["customizations"]["vscode"]["settings"]["python.defaultInterpreterPath"]
    makefile = (ROOT / "autograder" / "package" / "templates" / "student.mk").read_text()
    venv = re.search(r"^VENV \?= (\S+)$", makefile, re.MULTILINE)[1]
    assert interpreter == f"${{containerWorkspaceFolder}}/{venv}/bin/python"
    assert config["containerEnv"] == {"TORCH_INDEX": "${localEnv:TORCH_INDEX}"}  # the host's, passed to make


def stand_in(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of .devcontainer/ in a folder, and a bin/ of stand-ins that log their calls to calls.log."""
    shutil.copytree(DEVCONTAINER, tmp_path / "repo" / ".devcontainer")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("dirname", "tail"):
        (bin_ / tool).symlink_to(shutil.which(tool))
    stand_in(bin_, "make", f'echo "make $* in $(pwd)" >> {tmp_path}/calls.log\n')
    stand_in(bin_, "python3", 'case "$*" in *--version*) echo "Python 3.11.2";; esac\nexit 0\n')
    stand_in(bin_, "id", "echo 0\n")
    return tmp_path


def setup(tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", str(tmp_path / "repo" / ".devcontainer" / "setup.sh")], capture_output=True,
                          text=True, env={"PATH": str(tmp_path / "bin"), "TMPDIR": str(tmp_path)}, cwd=tmp_path,
                          timeout=60)


def calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_set_up_is_the_repositorys_own_make_install(repo):
    done = setup(repo)
    assert done.returncode == 0, done.stderr
    assert calls(repo) == [f"make install in {repo / 'repo'}"] and "setup: done; run make test" in done.stdout


def test_as_root_it_installs_make_and_the_venv_module_with_apt_where_they_are_missing(repo):
    (repo / "bin" / "make").rename(repo / "make")  # apt-get puts it back
    put_back = f'{shutil.which("mv")} {repo}/make {repo}/bin/make'
    stand_in(repo / "bin", "apt-get", f'echo "apt-get $*" >> {repo}/calls.log\ncase "$*" in *install*) {put_back};; esac\n')
    stand_in(repo / "bin", "python3", 'case "$*" in *ensurepip*) exit 1;; esac\nexit 0\n')  # Debian's, no venv
    done = setup(repo)
    assert done.returncode == 0, done.stderr
    assert calls(repo) == ["apt-get update -qq", "apt-get install -y -qq make python3-venv",
                           f"make install in {repo / 'repo'}"]


def test_a_failing_apt_get_is_shown_with_the_end_of_its_output(repo):
    (repo / "bin" / "make").unlink()
    stand_in(repo / "bin", "apt-get", 'echo "E: Unable to locate package make"; exit 100\n')
    done = setup(repo)
    assert done.returncode == 1 and calls(repo) == []
    assert "setup: apt-get could not install make; the end of its output" in done.stderr
    assert "E: Unable to locate package make" in done.stderr


def test_without_root_it_says_what_to_install_and_stops(repo):
    (repo / "bin" / "make").unlink()
    stand_in(repo / "bin", "id", "echo 1000\n")
    done = setup(repo)
    assert done.returncode == 1 and calls(repo) == []
    assert "setup: this needs make: install them (on Debian or Ubuntu: sudo apt-get install make)" in done.stderr


def test_an_old_python_is_refused_with_its_version(repo):
    stand_in(repo / "bin", "python3", 'case "$*" in *--version*) echo "Python 3.9.2";; *version_info*) exit 1;; '
                                      'esac\nexit 0\n')
    done = setup(repo)
    assert done.returncode == 1 and calls(repo) == []
    assert "the course needs Python 3.11 or newer; python3 here is Python 3.9.2" in done.stderr
