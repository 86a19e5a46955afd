"""One grading step of the GitHub Classroom workflow: run one public test file, report its points.

    python -m autograder.package.classroom_step tests/resource_accounting/test_memory.py --max-score 19.5

It runs the file with pytest in this process (pytest's usual output goes to the step's log, the
points table included) and then writes what GitHub Classroom's grading reporter reads from a step:
`result=<base64 JSON>` appended to $GITHUB_OUTPUT (printed as JSON when that is not set), in the
format of classroom-resources' graders: version 1, the step's status and max_score, and one entry
per test with its own score, so points are per test. Tests that need a GPU score 0 on GitHub's
runners without failing the step. It exits 0 once the result is written: the reporter fails the run.

This ships in the GitHub Classroom template. The student's code runs in this very process on a
runner the student controls, so these points are feedback, not the grade.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys

import pytest

FAILING = ("failed", "error", "not_implemented")


class _Results:
    """A pytest plugin that keeps the run's GradeReport."""

    report = None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from autograder.harness.plugin import report_of

        self.report = report_of(session.config)


def result(report, path: str, max_score: float) -> dict:
    """The reporter's view of one step (a GradeReport of one test file)."""
    tests = report.tests if report is not None else []
    entries = [{"name": t.name.split("::", 1)[-1], "status": "pass" if t.status == "passed" else "fail",
                "score": t.points, "message": t.message or t.status.replace("_", " "), "test_code": "",
                "filename": path, "line_no": 0, "duration": 0} for t in tests]
    total = sum(t.max_points for t in tests)
    if not tests or abs(total - max_score) > 1e-9:
        why = (f"{path}: no test ran" if not tests else
               f"{path} is worth {total:g} points but the workflow says {max_score:g}: run `make classroom` again")
        return {"version": 1, "status": "error", "max_score": max_score, "tests": entries, "message": why}
    status = "fail" if any(t.status in FAILING for t in tests) else "pass"
    return {"version": 1, "status": status, "max_score": total, "tests": entries}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="the public test file to run")
    parser.add_argument("--max-score", type=float, required=True, help="the file's points, as the workflow says")
    args = parser.parse_args(argv)
    results = _Results()
    pytest.main(["-q", "--tb=short", args.path], plugins=[results])
    outcome = result(results.report, args.path, args.max_score)
    encoded = base64.b64encode(json.dumps(outcome).encode()).decode()
    target = os.environ.get("GITHUB_OUTPUT")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(f"result={encoded}\n")
    else:
        print(json.dumps(outcome, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
