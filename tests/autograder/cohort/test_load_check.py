"""make load-check's verdict (autograder.cohort.load_check): two gradebooks of the same cohort, one graded idle
and one under load, compared test by test; any difference is named and makes the exit status 1.

The gradebooks are written by hand here (autograder.report.gradebook.Gradebook), nothing is graded: the
idle run's WORK/idle/gradebook.sqlite and the loaded run's WORK/loaded/gradebook.sqlite, as main() leaves them.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from autograder.cohort.load_check import ROOT, commit, compare, conclude, results
from autograder.model.results import GradeReport
from autograder.model.results import TestResult as Result
from autograder.report.gradebook import Gradebook

ALPHA = "tests/alpha/test_toy.py::test_"


def report(name: str, **changed: str) -> GradeReport:
    """alice's or bob's report: three tests that pass and a written answer graded 1 / 2 by hand; `changed` maps
    a test's short name (q0, q1, q2) to another status, or `hand` to another hand-graded score."""
    tests = [Result(f"{ALPHA}{q}", "alpha", 1.0, changed.get(q, "passed")) for q in ("q0", "q1", "q2")]
    tests.append(Result("written/w1", "alpha", 2.0, "hand_graded", points=float(changed.get("hand", 1.0))))
    return GradeReport(name, tests, log=["toy grader"])


def gradebook(out: Path, reports: list[GradeReport], errors: dict[str, str] | None = None,
              not_gradable: tuple[str, ...] = ()) -> Path:
    with Gradebook(out / "gradebook.sqlite") as book:
        for one in reports:
            book.record(one.submission, f"digest of {one.submission}", one)
        for name in not_gradable:
            book.record(name, f"digest of {name}", GradeReport(name, not_gradable=f"{name}.zip is a corrupt zip"))
        for name, message in (errors or {}).items():
            book.record_error(name, f"digest of {name}", message)
    return out


def runs(work: Path, idle: dict, loaded: dict) -> Path:
    gradebook(work / "idle", **idle)
    gradebook(work / "loaded", **loaded)
    return work


def both(**changes) -> dict:
    return {"reports": [report("alice"), report("bob")], "not_gradable": ("carol",), **changes}


def verdict(work: Path, capsys) -> tuple[int, str]:
    status = conclude(work, 3, ["idle: 2 workers, 10 s", "loaded: 3 busy processes beside 3 workers, 12 s"], 15)
    text = (work / "load_check.md").read_text(encoding="utf-8")
    assert capsys.readouterr().out == text  # printed as written
    return status, text


def test_the_same_grades_make_no_difference_and_exit_0(tmp_path, capsys):
    work = runs(tmp_path, both(), both())
    assert compare(work / "idle", work / "loaded") == []
    status, text = verdict(work, capsys)
    assert status == 0
    assert text.startswith("# Grades idle and under load: 3 submissions, 8 test results each run\n")
    assert "- idle: 2 workers, 10 s\n- loaded: 3 busy processes beside 3 workers, 12 s\n" in text
    assert "- per-call budget: 15 CPU seconds" in text
    assert text.endswith("\n0 difference(s): every test result is the same.\n")


def test_results_reads_each_test_and_each_error(tmp_path):
    out = gradebook(tmp_path, [report("alice", q1="failed")], errors={"dan": "Traceback\nMemoryError: out"})
    tests, errors = results(out)
    assert tests[("alice", f"{ALPHA}q1")] == ("failed", 0.0)
    assert tests[("alice", "written/w1")] == ("hand_graded", 1.0)
    assert len(tests) == 4 and errors == {"dan": "Traceback\nMemoryError: out"}


@pytest.mark.parametrize("loaded, expected", [
    (both(reports=[report("alice"), report("bob", q1="failed")]),
     f"bob {ALPHA}q1: idle ('passed', 1.0), loaded ('failed', 0.0)"),  # a status
    (both(reports=[report("alice", hand=1.5), report("bob")]),
     "alice written/w1: idle ('hand_graded', 1.0), loaded ('hand_graded', 1.5)"),  # points, the same status
    (both(reports=[report("alice")]), "bob: idle graded, loaded absent"),  # a submission missing
    (both(not_gradable=()), "carol: idle not_gradable, loaded absent"),  # one without tests missing
    (both(reports=[report("alice")], not_gradable=("carol", "bob")), "bob: idle graded, loaded not_gradable"),
    (both(reports=[report("alice")], errors={"bob": "Traceback (most recent call last):\nTimeoutError: no reply"}),
     "bob: not graded loaded (TimeoutError: no reply)"),  # an error row, by its last line
], ids=["status", "points", "missing", "missing-not-gradable", "now-not-gradable", "error"])
def test_each_difference_is_named_and_makes_the_exit_status_1(tmp_path, capsys, loaded, expected):
    work = runs(tmp_path, both(), loaded)
    assert compare(work / "idle", work / "loaded") == [expected]
    status, text = verdict(work, capsys)
    assert status == 1
    assert text.endswith(f"\n1 difference(s):\n- {expected}\n")


def test_an_error_in_both_runs_is_a_difference_of_each(tmp_path):
    """A submission neither run graded proves nothing: both are named."""
    work = runs(tmp_path, both(errors={"dan": "boom"}), both(errors={"dan": ""}))
    assert compare(work / "idle", work / "loaded") == ["dan: not graded idle (boom)",
                                                       "dan: not graded loaded (no reason)"]


def test_the_summary_names_the_commit_it_ran_on(tmp_path, capsys):
    work = runs(tmp_path, both(), both())
    _, text = verdict(work, capsys)
    assert f"\n- commit: {commit()}\n" in text
    if shutil.which("git") and (ROOT / ".git").exists():
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        assert commit() == head.stdout.strip() and len(commit()) >= 7


def test_the_commit_is_unknown_outside_git_or_without_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # no repository above tmp_path counts
    assert commit(tmp_path) == "unknown"
    monkeypatch.setenv("PATH", str(tmp_path))  # no git at all
    assert commit() == "unknown"
    work = runs(tmp_path / "work", both(), both())
    status = conclude(work, 3, [], 15)
    assert status == 0 and "\n- commit: unknown\n" in (work / "load_check.md").read_text(encoding="utf-8")
