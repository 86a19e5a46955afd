"""Gradescope's results.json: the report in Gradescope's documented autograder output format.

Gradescope knows two test statuses, passed and failed, so every other status becomes "failed" with
its reason at the start of the test's output. Test visibilities use Gradescope's own names, so they
pass through unchanged. The schema this output follows is gradescope_schema.json beside this file.
"""

from __future__ import annotations

import json
from pathlib import Path

from autograder.report.text import clean, explanation
from autograder.results import GradeReport, TestResult

SCHEMA = Path(__file__).with_name("gradescope_schema.json")


def schema() -> dict:
    return json.loads(SCHEMA.read_text())


def case_entry(test: TestResult) -> dict:
    output = explanation(test)
    if test.status != "passed" and test.hint:
        output += f"\nHint: {test.hint}"
    return {
        "name": test.name,
        "score": float(test.points),
        "max_score": float(test.max_points),
        "status": "passed" if test.status == "passed" else "failed",
        "output": output,
        "visibility": test.visibility,
    }


def results_json(report: GradeReport) -> dict:
    return {
        "score": float(report.score),
        "execution_time": round(report.execution_time, 3),
        "output": "\n".join(clean(line) for line in report.log),
        "visibility": "visible",
        # The grader's stdout may name hidden tests: instructors only.
        "stdout_visibility": "hidden",
        "tests": [case_entry(test) for test in report.tests],
    }
