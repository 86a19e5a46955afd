"""Written results in every report view: numeric parts like tests, prose "to be graded by hand" (0 until
an instructor's score is imported) and "graded by hand" (the imported points)."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest
from rich.console import Console

from autograder.report import feedback_markdown, junit_xml, results_json
from autograder.report.gradescope import schema
from autograder.report.terminal import print_report
from autograder.model.results import GradeReport, TestResult, summary_lines

RA = "resource_accounting"
ANSWER = "The weight is read once per step <script>x</script>"


def report() -> GradeReport:
    return GradeReport(submission="alice", tests=[
        TestResult(f"tests/{RA}/test_memory.py::test_bytes", RA, 2, "passed"),
        TestResult("written/Q6.1.e", RA, 1, "passed", message="Q6.1.e: 319 is exactly of the key"),
        TestResult("written/Q6.1.a", RA, 0.5, "failed", message="Q6.1.a: expected within ±1% of the key; got 70"),
        TestResult("written/Q6.1", RA, 1, "manual", message="Q6.1: to be graded by hand (52 characters)",
                   answer=ANSWER),
        TestResult("written/Q9.1", RA, 2, "hand_graded", points=1.5, message="graded by hand: 1.5 / 2\ngood",
                   answer=ANSWER),
    ])


def test_hand_graded_points_count_and_survive_json():
    again = GradeReport.from_json(report().to_json())
    assert again.score == report().score == 2 + 1 + 1.5 and again.max_score == 6.5
    assert [t.answer for t in again.tests][-1] == ANSWER
    with pytest.raises(ValueError):
        TestResult("written/X1", RA, 1, "graded")
    assert TestResult("written/X1", RA, 1, "hand_graded", points=5).points == 1  # never above its maximum
    assert TestResult("written/X1", RA, 1, "manual", points=1).points == 0


def test_the_summary_and_feedback_say_what_is_still_to_grade_by_hand():
    assert "1 by hand still to grade" in summary_lines(report())[0]
    text = feedback_markdown(report())
    assert "Score: **4.5 / 6.5** points; 1 of them awaiting hand grading." in text
    assert "## Graded by hand: 1 answer" in text and "## To be graded by hand: 1 answer" in text
    assert "expected within ±1% of the key; got 70" in text  # a wrong number is a failure to fix


def test_results_json_leaves_the_prose_to_gradescopes_manual_grading():
    data = results_json(report())
    jsonschema.validate(data, schema())
    entry = next(t for t in data["tests"] if t["name"].startswith("written/Q6.1 "))
    assert (entry["name"], entry["score"], entry["max_score"], "status" in entry) == \
        ("written/Q6.1 (graded by hand)", 0, 0, False)
    assert "worth 1 points, graded by hand" in entry["output"]
    assert "maximum 6.5 points: 5.5 in the tests listed here, 1 for written answers graded by hand" in data["output"]
    assert data["score"] == 4.5


def test_junit_skips_the_prose_to_grade_and_counts_the_graded():
    root = ET.fromstring(junit_xml(report()).split("\n", 1)[1])
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert cases["written/Q6.1"].find("skipped").get("message") == "to be graded by hand"
    assert cases["written/Q9.1"].find("skipped") is None and cases["written/Q9.1"].find("failure") is None
    props = {p.get("name"): p.get("value") for p in cases["written/Q9.1"].iter("property")}
    assert (props["points"], props["status"]) == ("1.5", "hand_graded")


def test_the_terminal_table_shows_both_statuses():
    console = Console(file=io.StringIO(), width=160)
    print_report(report(), console)
    text = console.file.getvalue()
    assert "manual" in text and "hand graded" in text
    assert "total 4.5 / 6.5 points; 1 of them awaiting hand grading" in text
    assert json.dumps(ANSWER) not in text  # the answer itself is for the grading sheet, not the table
