"""Gradescope's results.json: the report in Gradescope's documented autograder output format.

Gradescope knows two test statuses, passed and failed, so every other status becomes "failed" with
its reason at the start of the test's output, except "not graded here: needs a GPU": such a test is
listed as 0 of 0 points without a status (neither passed nor failed), its name and output say why.
The prose of each written question is left to Gradescope's manual grading the same way, whether it awaits
a grader, is blank or is missing: listed as 0 of 0 points without a status, named "(graded by hand)", the
output saying what it is worth; so the tests' points add up to the same figure for every submission, the
maximum (autograder.report.parts: the one rule) less the written answers' points, which is what to set as
the autograder's points on Gradescope, with a manually graded question worth the rest. (In a batch's
files, an answer already scored by hand is listed with its score.) The output's first line is the score out
of the maximum as every view says it, the next one how the maximum splits, and extra_data holds the numbers.

A submission that is not gradable, or that the grader could not complete, has no score, and Gradescope's
format has no way to say "no score" (a file without a score needs one on each test, and any score would be
read as a 0): `write_results` writes no results.json for it, which Gradescope documents as the autograder
failing ("The autograder failed to execute correctly"): the run is marked failed for the course staff and
the student gets no score, never a 0; the grader's output (Gradescope shows it to the staff) says why, and
feedback.md beside it. Test visibilities use Gradescope's own names, so they pass through unchanged. The
schema this output follows is gradescope_schema.json beside this file.

Once an assignment's answers are released (the course file's date, autograder/cohort/answers.py), its
answer key follows the tests as one more entry of 0 / 0 points without a status, in Markdown, with
visibility "after_due_date": Gradescope shows it to students only after the due date, and no
results.json written before the release holds it (regrade on Gradescope after the release date to add it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from autograder.report.parts import WRITTEN_PROSE, as_dict, describe, parts_of
from autograder.report.text import clean, explanation, rounded
from autograder.model.results import GradeReport, TestResult
from autograder.report.answers import AnswerKey, key_markdown

SCHEMA = Path(__file__).with_name("gradescope_schema.json")
NOT_GRADED = ("Not graded: the grader could not complete this submission (its own failure, not a score of 0); "
              "it is graded again")


def schema() -> dict:
    return json.loads(SCHEMA.read_text())


def by_hand(test: TestResult) -> bool:
    """A written question's prose not scored yet (awaiting a grader, blank or missing): Gradescope's manual
    grading gives its points, never the autograder."""
    return bool(WRITTEN_PROSE.fullmatch(test.name)) and test.status != "hand_graded"


def case_entry(test: TestResult) -> dict:
    output = explanation(test)
    if test.status != "passed" and test.hint:
        output += f"\nHint: {test.hint}"
    if by_hand(test):
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


def maximum_note(report: GradeReport) -> list[str]:
    """How the maximum splits: the autograder's points (the tests' max_score, the same for every submission),
    the written answers' points graded by hand, and the points needing a GPU (not counted)."""
    parts = parts_of(report.tests)
    hand = sum(t.max_points for t in report.tests if by_hand(t))
    waiting = [t for t in report.tests if t.status == "not_graded"]
    lines = [f"maximum {parts.maximum:g} points: {parts.maximum - hand:g} in the tests listed here"
             + (f", {hand:g} for written answers graded by hand (listed as 0 / 0; on Gradescope, a manually "
                f"graded question worth {hand:g})" if hand else "")]
    if waiting:
        lines.append(f"not counted: {len(waiting)} test{'s' * (len(waiting) != 1)} worth "
                     f"{sum(t.max_points for t in waiting):g} points need{'s' * (len(waiting) == 1)} a GPU, not "
                     "graded here (listed as 0 / 0)")
    return lines


def answer_entry(key: AnswerKey, tests: list[TestResult]) -> dict:
    """The released answer key of one assignment, shown by Gradescope after the due date."""
    return {"name": f"Answers: {key.assignment} (released {key.release.isoformat()})", "score": 0.0,
            "max_score": 0.0, "output": key_markdown(key, 1, tests), "output_format": "md",
            "visibility": "after_due_date"}


def results_json(report: GradeReport, released: Mapping[str, AnswerKey] | None = None) -> dict:
    """results.json; `released`: the AnswerKey of each assignment whose answers students may see now."""
    if not scored(report):
        raise ValueError(f"{report.submission} has no score ({no_score(report)}): Gradescope's format cannot say "
                         "so, and write_results writes no results.json for it")
    parts = parts_of(report.tests)
    return {
        "score": rounded(parts.score),
        "execution_time": round(report.execution_time, 3),
        "output": "\n".join(clean(line) for line in [f"Score: {describe(parts)}"] + maximum_note(report)
                             + report.log),
        "extra_data": {"points": as_dict(parts)},
        "visibility": "visible",
        # The grader's stdout may name hidden tests: instructors only.
        "stdout_visibility": "hidden",
        "tests": [case_entry(test) for test in report.tests]
        + [answer_entry(released[name], tests) for name, tests in report.by_assignment().items()
           if name in (released or {})],
    }


def scored(report: GradeReport) -> bool:
    """Whether the report has a score (it was graded: not "not gradable", not a failure of the grader)."""
    return not report.not_gradable and bool(report.tests)


def no_score(report: GradeReport) -> str:
    """Why a report has no score, in one line."""
    return f"Not gradable: {report.not_gradable}" if report.not_gradable else NOT_GRADED


def write_results(report: GradeReport, path: Path, released: Mapping[str, AnswerKey] | None = None) -> bool:
    """results.json at `path` for a report with a score; for one without, no file (an earlier one is removed):
    Gradescope marks the run failed, never a 0 (the module's docstring). Returns whether it wrote the file."""
    if not scored(report):
        path.unlink(missing_ok=True)
        return False
    path.write_text(json.dumps(results_json(report, released), indent=2) + "\n")
    return True


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
