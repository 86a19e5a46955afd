"""Gradescope's results.json: the report in Gradescope's documented autograder output format.

Gradescope knows two test statuses, passed and failed, so every other status becomes "failed" with
its reason at the start of the test's output, except "not graded here: needs a GPU": such a test is
listed as 0 of 0 points without a status (neither passed nor failed), its name and output say why,
and the overall output says what the score is out of (the assignment's total to set on Gradescope).
Written answers graded by hand (status "manual") are left to Gradescope's manual grading the same
way: listed as 0 of 0 points without a status, named "(graded by hand)", the output saying what they
are worth; the overall output says how many points are graded by hand, outside the autograder score
(set up a manually graded question with the handout's rubric for them). The output's first line is the
score with the parts of the maximum as every view names them (autograder.report.parts), and extra_data
holds them as numbers. A submission that is not gradable, or that the grader could not complete, has no
score and no tests: the output's first line says why. Test visibilities use Gradescope's own names, so they pass through unchanged. The schema this output follows is gradescope_schema.json beside this file.

Once an assignment's answers are released (the course file's date, autograder/cohort/answers.py), its
answer key follows the tests as one more entry of 0 / 0 points without a status, in Markdown, with
visibility "after_due_date": Gradescope shows it to students only after the due date, and no
results.json written before the release holds it (regrade on Gradescope after the release date to add it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from autograder.report.parts import as_dict, describe, parts_of
from autograder.report.text import clean, explanation, rounded
from autograder.model.results import GradeReport, TestResult
from autograder.report.answers import AnswerKey, key_markdown

SCHEMA = Path(__file__).with_name("gradescope_schema.json")
NOT_GRADED = ("Not graded: the grader could not complete this submission (its own failure, not a score of 0); "
              "it is graded again")


def schema() -> dict:
    return json.loads(SCHEMA.read_text())


def case_entry(test: TestResult) -> dict:
    output = explanation(test)
    if test.status != "passed" and test.hint:
        output += f"\nHint: {test.hint}"
    if test.status == "manual":  # Gradescope's manual grading gives these points, not the autograder
        return {"name": f"{test.name} (graded by hand)", "score": 0.0, "max_score": 0.0,
                "output": f"{output}; worth {test.max_points:g} points, graded by hand with the handout's rubric "
                          "(not part of the autograder score)",
                "visibility": test.visibility}
    if test.status == "not_graded":  # 0 of 0 and no status: neither passed nor failed, and out of the total
        return {"name": f"{test.name} (not graded here: needs a GPU)", "score": 0.0, "max_score": 0.0,
                "output": f"{output}; worth {test.max_points:g} points where graded on a GPU",
                "visibility": test.visibility}
    return {
        "name": test.name,
        "score": float(test.points),
        "max_score": float(test.max_points),
        "status": "passed" if test.status == "passed" or (
            test.status == "hand_graded" and test.points == test.max_points) else "failed",
        "output": output,
        "visibility": test.visibility,
    }


def gpu_note(report: GradeReport) -> list[str]:
    """What the total is out of, when some tests were not graded for want of a GPU."""
    waiting = [t for t in report.tests if t.status == "not_graded"]
    if not waiting:
        return []
    graded = sum(t.max_points for t in report.tests if t.status not in ("not_graded", "manual"))
    tests = f"{len(waiting)} test{'s' * (len(waiting) != 1)} worth {sum(t.max_points for t in waiting):g} points"
    return [f"score out of {graded:g} points: {tests} need{'s' * (len(waiting) == 1)} a GPU, not graded "
            "here (listed as 0 / 0)"]


def manual_note(report: GradeReport) -> list[str]:
    """How many points the written answers graded by hand are worth, outside this score."""
    manual = [t for t in report.tests if t.status == "manual"]
    if not manual:
        return []
    return [f"{sum(t.max_points for t in manual):g} points of written answers are graded by hand ({len(manual)} "
            "answers, listed as 0 / 0): they come from manual grading, not from this score"]


def answer_entry(key: AnswerKey, tests: list[TestResult]) -> dict:
    """The released answer key of one assignment, shown by Gradescope after the due date."""
    return {"name": f"Answers: {key.assignment} (released {key.release.isoformat()})", "score": 0.0,
            "max_score": 0.0, "output": key_markdown(key, 1, tests), "output_format": "md",
            "visibility": "after_due_date"}


def results_json(report: GradeReport, released: Mapping[str, AnswerKey] | None = None) -> dict:
    """results.json; `released`: the AnswerKey of each assignment whose answers students may see now."""
    if report.not_gradable or not report.tests:  # no score at all: the output's first line says why
        why = f"Not gradable: {report.not_gradable}" if report.not_gradable else NOT_GRADED
        return {"execution_time": round(report.execution_time, 3), "visibility": "visible",
                "output": "\n".join(clean(line) for line in [why, *report.log]), "stdout_visibility": "hidden",
                "extra_data": {"not_gradable": clean(report.not_gradable)} if report.not_gradable else {},
                "tests": []}
    parts = parts_of(report.tests)
    return {
        "score": rounded(parts.score),
        "execution_time": round(report.execution_time, 3),
        "output": "\n".join(clean(line) for line in [f"Score: {describe(parts)}"] + gpu_note(report)
                             + manual_note(report) + report.log),
        "extra_data": {"points": as_dict(parts)},
        "visibility": "visible",
        # The grader's stdout may name hidden tests: instructors only.
        "stdout_visibility": "hidden",
        "tests": [case_entry(test) for test in report.tests]
        + [answer_entry(released[name], tests) for name, tests in report.by_assignment().items()
           if name in (released or {})],
    }


def with_adjustments(results: dict, lines: list[str], added: float) -> dict:
    """results.json with the course file's overrides applied (autograder.cohort.late.mark_adjusted): the score
    with `added` (each score set less the one it replaces), and what was set at the top of the output."""
    note = "\n".join(["Set by the course staff:", *(clean(line) for line in lines)])
    return {**results, "score": rounded(max(0.0, float(results["score"]) + added)),
            "output": note + ("\n" + results["output"] if results.get("output") else "")}


def with_late(results: dict, lines: list[str], deducted: float) -> dict:
    """results.json with the late policy applied: the score less what it deducted, and the raw and
    penalised scores at the top of the output (autograder.cohort.late)."""
    note = "\n".join(["Late policy (raw and penalised scores):", *(clean(line) for line in lines)])
    return {**results, "score": rounded(max(0.0, float(results["score"]) - deducted)),
            "output": note + ("\n" + results["output"] if results.get("output") else "")}
