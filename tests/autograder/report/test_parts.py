"""One denominator, named the same everywhere: the maximum and its parts (autograder.report.parts) of one report
read the same in feedback.md, results.json, junit.xml, the terminal, grades.csv, the cohort report and the
nbgrader comment; nbgrader's cells add up to the trusted score and maximum; the trusted feedback of a notebook
says what nbgrader's comment says."""

from __future__ import annotations

import csv
import io
import json

from rich.console import Console

from autograder.cohort.batch import run_batch
from autograder.model.results import GradeReport, TestResult
from autograder.package.nbgrader import TRUSTED_CELL
from autograder.package.nbgrader_scores import TRUSTED, TestCell, comment, scored, why_they_differ
from autograder.report import write_all
from autograder.report.gradescope import results_json
from autograder.report.markdown import feedback_markdown
from autograder.report.parts import describe, parts_of
from autograder.report.terminal import print_report
from tests.autograder.report.test_gradebook import quiet

LINE = "3.3 / 5.9 points; 1.5 of them awaiting hand grading; 2.5 more need a GPU, not graded here (not counted)"
BOLD = ("Score: **3.3 / 5.9** points; 1.5 of them awaiting hand grading; 2.5 more need a GPU, not graded here "
        "(not counted).")


def report(name: str = "ann") -> GradeReport:
    return GradeReport(name, [
        TestResult("tests/alpha/test_a.py::test_one", "alpha", 1.1, "passed"),
        TestResult("tests/alpha/test_a.py::test_two", "alpha", 1.1, "passed"),
        TestResult("tests/alpha/test_a.py::test_three", "alpha", 1.1, "passed"),
        TestResult("tests/alpha/test_a.py::test_four", "alpha", 1.1, "failed"),
        TestResult("written/Q1", "alpha", 1.5, "manual", answer="an answer"),
        TestResult("tests/alpha/test_gpu.py::test_fast", "alpha", 2.5, "not_graded"),
    ])


def test_the_parts_are_defined_once_and_said_the_same_way():
    parts = parts_of(report().tests)
    assert describe(parts) == LINE and parts.maximum == parts.graded + parts.by_hand


def test_every_view_of_one_report_shows_the_same_parts(tmp_path):
    assert BOLD in feedback_markdown(report())
    results = results_json(report())
    assert results["output"].splitlines()[0] == f"Score: {LINE}" and results["score"] == 3.3
    assert results["extra_data"]["points"] == {"score": 3.3, "maximum": 5.9, "graded": 4.4, "by_hand": 1.5, "gpu": 2.5}
    assert junit_suite(report()) == {"points": "3.3", "max_points": "5.9", "awaiting_hand_grading": "1.5",
                                     "not_counted_needing_a_gpu": "2.5"}
    console = Console(file=io.StringIO(), width=300)
    print_report(report(), console)
    assert f"total {LINE}" in console.file.getvalue()
    (tmp_path / "c" / "ann").mkdir(parents=True)
    run_batch(tmp_path / "c", tmp_path / "out", grade_fn=lambda path: report(path.name), console=quiet())
    row = next(csv.DictReader((tmp_path / "out" / "grades.csv").open()))
    assert [row[k] for k in ("alpha", "alpha max", "alpha max awaiting hand grading",
                             "alpha not counted: needing a GPU")] == ["3.3", "5.9", "1.5", "2.5"]
    assert [row[k] for k in ("total", "max", "total final", "total final max")] == ["3.3", "5.9", "3.3", "5.9"]
    index = (tmp_path / "out" / "report" / "index.html").read_text()
    assert 'data-field="total">3.3 / 5.9<' in index and 'data-field="max_score">5.9<' in index
    assert 'data-field="by_hand">1.5<' in index and 'data-field="gpu_points">2.5<' in index
    ann = tmp_path / "out" / "submissions" / "ann"
    feedback = (ann / "feedback.md").read_text()
    assert json.loads((ann / "results.json").read_text())["extra_data"]["points"]["maximum"] == 5.9
    assert BOLD in feedback


# The notebook's cells as nbgrader.build writes them for report(): the test cell of group `a` runs tests one to
# three (test_four needs the reference solution), the GPU test has no cell, the trusted grader's cell carries
# test_four's points, and the written answer's cell (graded in formgrader) the rubric's.
CELLS = [TestCell("test_a", 3.3, "a"), TestCell(TRUSTED_CELL, 1.1, TRUSTED)]
ANSWER_CELL = 1.5


def junit_suite(trusted: GradeReport) -> dict[str, str]:
    import xml.etree.ElementTree as ET

    from autograder.report.junit import junit_xml

    suite = ET.fromstring(junit_xml(trusted).split("?>", 1)[1]).find("testsuite")
    return {p.get("name"): p.get("value") for p in suite.find("properties")}


def test_nbgraders_cells_add_up_to_the_trusted_score_and_maximum():
    result = scored("ann", "nb", CELLS, report())
    assert result.cells["test_a"] == (2.47, 3.3)  # 3 of the 4 tests of group a: 0.75 of the cell's points, 2.475
    assert result.points == 3.3 == parts_of(report().tests).score  # the trusted cell holds the rest
    assert result.max_points + ANSWER_CELL == parts_of(report().tests).maximum
    text = comment(result)
    assert "nbgrader: 3.3 / 4.4 points on the notebook's test cells and the trusted grader's cell" in text
    assert f"the trusted grader's report: {LINE}." in text and "The same score" in text


def test_a_notebook_without_a_score_leaves_nbgraders_cells_without_one():
    blank = GradeReport("ann", log=["toy"], not_gradable="the notebook is not valid JSON: submit it again")
    result = scored("ann", "nb", CELLS, blank)
    assert not result.graded and all(got is None for got, _ in result.cells.values())
    assert "no score" in comment(result) and "not valid JSON" in comment(result)


def test_the_trusted_feedback_says_why_the_scores_differ_as_the_comment_does(tmp_path):
    """grade_course puts why_they_differ first in the trusted report's log, so that feedback.md says, word for
    word, what nbgrader's comment says: both scores and the reason."""
    trusted = report()
    trusted.log = ["sandbox: bubblewrap"]
    result = scored("ann", "nb", CELLS, trusted)
    why = why_they_differ(result)
    assert why in comment(result).splitlines()
    trusted.log = [why, *trusted.log]  # as grade_course does
    write_all(trusted, tmp_path)
    feedback = (tmp_path / "feedback.md").read_text(encoding="utf-8")
    assert feedback == feedback_markdown(trusted) and why in feedback.splitlines()
    assert "nbgrader: 3.3 / 4.4 points on the notebook's test cells" in feedback
    assert f"the trusted grader's report: {LINE}. The same score" in feedback
    assert BOLD in feedback  # beside the trusted report's own score
