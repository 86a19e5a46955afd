"""One denominator, named the same everywhere: the parts of a maximum (autograder.report.parts) of one report
read the same in feedback.md, results.json, the terminal, grades.csv, the cohort report and the nbgrader
comment, and the trusted feedback of a notebook says what nbgrader's comment says."""

from __future__ import annotations

import csv
import io
import json

from rich.console import Console

from autograder.cohort.batch import run_batch
from autograder.model.results import GradeReport, TestResult
from autograder.package.nbgrader_scores import TestCell, comment, scored, why_they_differ
from autograder.report import write_all
from autograder.report.gradescope import results_json
from autograder.report.markdown import feedback_markdown
from autograder.report.parts import describe, parts_of
from autograder.report.terminal import print_report
from tests.autograder.report.test_gradebook import quiet

LINE = "3.3 / 4.4 points graded here; 1.5 awaiting hand grading; 2.5 need a GPU, not graded here; 8.4 in all"
BOLD = "Score: **3.3 / 4.4** points graded here; 1.5 awaiting hand grading; 2.5 need a GPU, not graded here; 8.4 in all."


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
    assert describe(parts) == LINE and parts.total == parts.graded + parts.by_hand + parts.gpu


def test_every_view_of_one_report_shows_the_same_parts(tmp_path):
    assert BOLD in feedback_markdown(report())
    results = results_json(report())
    assert results["output"].splitlines()[0] == f"Score: {LINE}" and results["score"] == 3.3
    assert results["extra_data"]["points"] == {"score": 3.3, "graded": 4.4, "by_hand": 1.5, "gpu": 2.5, "total": 8.4}
    console = Console(file=io.StringIO(), width=300)
    print_report(report(), console)
    assert f"total {LINE}" in console.file.getvalue()
    (tmp_path / "c" / "ann").mkdir(parents=True)
    run_batch(tmp_path / "c", tmp_path / "out", grade_fn=lambda path: report(path.name), console=quiet())
    row = next(csv.DictReader((tmp_path / "out" / "grades.csv").open()))
    assert [row[k] for k in ("alpha", "alpha max graded here", "alpha max awaiting hand grading",
                             "alpha max needing a GPU", "alpha max")] == ["3.3", "4.4", "1.5", "2.5", "8.4"]
    assert [row[k] for k in ("total", "max graded here", "max")] == ["3.3", "4.4", "8.4"]
    index = (tmp_path / "out" / "report" / "index.html").read_text()
    assert 'data-field="total">3.3 / 4.4<' in index and 'data-field="max">8.4<' in index
    assert 'data-field="max_graded">4.4<' in index and 'data-field="by_hand">1.5<' in index
    ann = tmp_path / "out" / "submissions" / "ann"
    feedback = (ann / "feedback.md").read_text()
    assert json.loads((ann / "results.json").read_text())["extra_data"]["points"]["graded"] == 4.4
    assert BOLD in feedback


def test_the_nbgrader_comment_gives_both_scores_and_why_they_differ():
    cells = [TestCell("cell-a", 10.0, "a"), TestCell("cell-gpu", 5.0, "gpu")]  # groups: collect.group_of
    result = scored("ann", "nb", cells, report())
    assert result.cells["cell-a"] == (7.5, 10.0)  # 3 of the 4 tests graded here; the hand-graded answer left out
    text = comment(result)
    assert "nbgrader: 7.5 / 15 points on the notebook's test cells" in text
    assert f"the trusted grader's report: {LINE}." in text and "They differ because" in text


def test_the_trusted_feedback_says_why_the_scores_differ_as_the_comment_does(tmp_path):
    """grade_course puts why_they_differ first in the trusted report's log, so that feedback.md says, word for
    word, what nbgrader's comment says: both scores and the reason."""
    cells = [TestCell("cell-a", 10.0, "a"), TestCell("cell-gpu", 5.0, "gpu")]
    trusted = report()
    trusted.log = ["sandbox: bubblewrap"]
    result = scored("ann", "nb", cells, trusted)
    why = why_they_differ(result)
    assert why in comment(result).splitlines()
    trusted.log = [why, *trusted.log]  # as grade_course does
    write_all(trusted, tmp_path)
    feedback = (tmp_path / "feedback.md").read_text(encoding="utf-8")
    assert feedback == feedback_markdown(trusted) and why in feedback.splitlines()
    assert "nbgrader: 7.5 / 15 points on the notebook's test cells" in feedback
    assert f"the trusted grader's report: {LINE}. They differ because each test cell is worth" in feedback
    assert BOLD in feedback  # beside the trusted report's own score
