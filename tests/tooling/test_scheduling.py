"""tests/conftest.py's scheduling under pytest-xdist: the files of a ONE_WORKER folder run on one worker, the
other files go to whichever worker is free, file by file."""

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RECORD = """
import os

import pytest


@pytest.mark.parametrize("case", range(3))
def test_record(case):
    with open(os.environ["RECORD"], "a") as out:
        out.write(f"{__name__} {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""


def workers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """{test module: the workers that ran its tests} of a two-worker `--dist loadfile` run."""
    record = pytester.path / "record.txt"
    monkeypatch.setenv("RECORD", str(record))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # xdist alone: the run starts three interpreters
    result = pytester.runpytest_subprocess("-p", "xdist", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile",
                                           "--no-loadscope-reorder", "tests")
    result.assert_outcomes(passed=15)
    ran: dict[str, set[str]] = {}
    for line in record.read_text().splitlines():
        module, worker = line.split()
        ran.setdefault(module, set()).add(worker)
    return ran


def test_the_package_folders_files_share_one_worker_and_the_others_spread(pytester, monkeypatch):
    pytest.importorskip("xdist", reason="pytest-xdist (an instructor dependency) is not installed")
    (pytester.path / "tests").mkdir()
    shutil.copyfile(ROOT / "tests" / "conftest.py", pytester.path / "tests" / "conftest.py")
    for path in ("autograder/package/test_a", "autograder/package/test_b", "autograder/package/test_c",
                 "other/test_x", "other/test_y"):
        (pytester.path / "tests" / path).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / "tests" / f"{path}.py").write_text(RECORD)
    ran = workers(pytester, monkeypatch)
    assert len(ran["test_a"] | ran["test_b"] | ran["test_c"]) == 1, ran
    assert all(len(found) == 1 for found in ran.values()), "a file was split between workers"
    # Without the folder rule, plain loadfile hands the first files out in turn: the same layout splits.
    (pytester.path / "tests" / "conftest.py").write_text("")
    (pytester.path / "record.txt").unlink()
    ran = workers(pytester, monkeypatch)
    assert len(ran["test_a"] | ran["test_b"] | ran["test_c"]) == 2, ran
