"""What could not be graded is not a zero: a corrupt zip, an empty folder, a folder whose only notebook does
not convert are "not gradable" with their reason first in every view, listed in the cohort report and left
out of its statistics; a grader error is listed too, and graded again, never silently 0. Gradescope's format
cannot say "no score", so such a report has no results.json: Gradescope marks the run failed."""

from __future__ import annotations

import csv
import sqlite3
import zipfile
from pathlib import Path

import jsonschema
import pytest

from autograder.cohort.batch import run_batch
from autograder.grading.intake import open_submission
from autograder.model.results import GradeReport, TestResult
from autograder.report import write_all
from autograder.report.gradebook import SCHEMA, Gradebook
from autograder.report.gradescope import results_json, schema, write_results
from tests.autograder.report.test_gradebook import quiet

PACKAGES = ["resource_accounting"]


def corrupt_zip(folder: Path) -> Path:
    path = folder / "zed.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("resource_accounting/flops.py", "x = 1\n" * 200)
    data = bytearray(path.read_bytes())
    data[40:80] = b"\xff" * 40  # the member's bytes: its CRC no longer matches
    path.write_bytes(bytes(data))
    return path


def empty_folder(folder: Path) -> Path:
    (folder / "empty").mkdir()
    return folder / "empty"


def broken_notebook(folder: Path) -> Path:
    (folder / "nb").mkdir()
    (folder / "nb" / "resource_accounting.ipynb").write_text("{ this is not a notebook")
    return folder / "nb"


@pytest.mark.parametrize("make", [corrupt_zip, empty_folder, broken_notebook])
def test_intake_refuses_with_a_reason(tmp_path, make):
    (tmp_path / "in").mkdir()
    source = make(tmp_path / "in")
    opened = open_submission(source, tmp_path / "stage", PACKAGES)
    assert opened.refused and opened.refused in opened.problems and opened.packages == []
    assert source.name in opened.refused  # the reason names what was refused


def not_gradable(name: str) -> GradeReport:
    return GradeReport(name, log=["sandbox: bubblewrap active", f"{name}.zip is a corrupt zip"],
                       not_gradable=f"{name}.zip is a corrupt zip (Bad CRC-32): recreate the zip from the folder")


def test_every_view_of_a_not_gradable_report_says_why_first_and_gives_no_score(tmp_path):
    report = not_gradable("zed")
    write_all(report, tmp_path)
    feedback = (tmp_path / "feedback.md").read_text().splitlines()
    assert feedback[2].startswith("**Not gradable**: `zed.zip is a corrupt zip") and "Score" not in "\n".join(feedback)
    assert not (tmp_path / "results.json").exists()  # Gradescope: "the autograder failed", never a 0
    assert GradeReport.from_json(report.to_json()).not_gradable == report.not_gradable


def grade_fn(path: Path) -> GradeReport:
    if path.name == "zed":
        return not_gradable("zed")
    if path.name == "err":
        return GradeReport("err", log=["the grader failed on this submission (exit code 1)"])
    return GradeReport(path.name, [TestResult("tests/alpha/t.py::test_a", "alpha", 2.0, "passed"),
                                   TestResult("tests/alpha/t.py::test_b", "alpha", 2.0, "failed")])


def test_a_cohort_lists_them_leaves_them_out_of_the_statistics_and_never_says_all_were_graded(tmp_path):
    for name in ("ann", "zed", "err"):
        (tmp_path / "c" / name).mkdir(parents=True)
        (tmp_path / "c" / name / "x.py").write_text(name)
    out = tmp_path / "out"
    rows = {r["name"]: r for r in run_batch(tmp_path / "c", out, grade_fn=grade_fn, console=quiet())}
    assert (rows["zed"]["status"], rows["zed"]["score"]) == ("not_gradable", None)
    assert "corrupt zip" in rows["zed"]["message"] and rows["err"]["status"] == "error"
    with Gradebook(out / "gradebook.sqlite") as book:
        assert book.is_current("zed", rows["zed"]["digest"]) and not book.is_current("err", rows["err"]["digest"])
    grades = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert (grades["zed"]["total"], grades["zed"]["status"]) == ("", "not_gradable")
    assert "corrupt zip" in grades["zed"]["reason"] and "exit code 1" in grades["err"]["reason"]
    index = (out / "report" / "index.html").read_text()
    assert 'id="count-not-gradable">1<' in index and 'id="count-errors">1<' in index
    assert 'id="count-graded">1<' in index and "Every submission was graded" not in index
    assert 'id="not-gradable-table"' in index and "recreate the zip from the folder" in index
    assert 'data-field="n">1<' in index  # the statistics count ann alone
    assert (out / "submissions" / "zed" / "feedback.md").read_text().splitlines()[2].startswith("**Not gradable**")
    assert (out / "submissions" / "err" / "feedback.md").read_text().splitlines()[2].startswith("**Not graded yet**")
    page = next((out / "report" / "submissions").glob("*-zed.html")).read_text()
    assert "<title>zed: not gradable</title>" in page and 'id="not-gradable-reason"' in page


def test_a_gradebook_made_before_not_gradable_existed_takes_it_and_keeps_its_rows(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA.replace("'graded', 'error', 'not_gradable'", "'graded', 'error'"))
        db.execute("INSERT INTO submissions VALUES ('ann', 'd', 'graded', 1.0, 2.0, '{\"alpha\": [1.0, 2.0]}', '', "
                   "'2026-01-01', NULL)")
    with Gradebook(path) as book:
        book.record("zed", "d2", not_gradable("zed"))
        assert [(r["name"], r["status"]) for r in book.rows()] == [("ann", "graded"), ("zed", "not_gradable")]


def test_the_gradescope_results_of_a_grader_error_are_not_a_silent_zero(tmp_path):
    """No results.json at all, which Gradescope documents as the autograder failing; and the format itself
    refuses a file without a score (the one a not-gradable submission used to get)."""
    failed = GradeReport("err", log=["the grader failed on this submission (exit code 1)"])
    (tmp_path / "results.json").write_text("{}")  # one of an earlier run
    assert not write_results(failed, tmp_path / "results.json") and not (tmp_path / "results.json").exists()
    with pytest.raises(ValueError, match="no score"):
        results_json(failed)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"output": "Not graded", "tests": []}, schema())
