"""One grading step of the GitHub Classroom workflow: run one public test file, report its points.

    python -m autograder.package.classroom_step tests/resource_accounting/test_memory.py --max-score 19.5

It runs the file with pytest in a child process (pytest's usual output goes to the step's log, the
points table included) with a deadline of its own (--timeout, 10 minutes by default, under the
step's timeout-minutes), and then writes what GitHub Classroom's grading reporter reads from a step:
`result=<base64 JSON>` appended to $GITHUB_OUTPUT (printed as JSON when that is not set), in the
format of classroom-resources' graders: version 1, the step's status and max_score, and one entry
per test with its own score, so points are per test. A run that passes its deadline (an endless
loop in one function) is killed with everything it started and reported as an error that says so;
the other steps report as usual. Tests that need a GPU are left out of the step's tests and of its
max_score on GitHub's runners (they have none): the message says how many and how many points. It
exits 0 once the result is written: the reporter fails the run.

This ships in the GitHub Classroom template. The student's code runs on a runner the student
controls, so these points are feedback, not the grade.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

FAILING = ("failed", "error", "not_implemented")
STEP_TIMEOUT = 600.0  # seconds; the workflow gives each step a few minutes more


class _Results:
    """A pytest plugin that keeps the run's GradeReport."""

    report = None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from autograder.harness.plugin import report_of

        self.report = report_of(session.config)


def result(report, path: str, max_score: float) -> dict:
    """The reporter's view of one step (a GradeReport of one test file)."""
    tests = report.tests if report is not None else []
    graded = [t for t in tests if t.status != "not_graded"]
    entries = [{"name": t.name.split("::", 1)[-1], "status": "pass" if t.status == "passed" else "fail",
                "score": t.points, "message": t.message or t.status.replace("_", " "), "test_code": "",
                "filename": path, "line_no": 0, "duration": 0} for t in graded]
    total = sum(t.max_points for t in tests)
    if not tests or abs(total - max_score) > 1e-9:
        why = (f"{path}: no test ran" if not tests else
               f"{path} is worth {total:g} points but the workflow says {max_score:g}: run `make classroom` again")
        return {"version": 1, "status": "error", "max_score": max_score, "tests": entries, "message": why}
    status = "fail" if any(t.status in FAILING for t in tests) else "pass"
    outcome = {"version": 1, "status": status, "max_score": sum(t.max_points for t in graded), "tests": entries}
    waiting = [t for t in tests if t.status == "not_graded"]
    if waiting:
        outcome["message"] = (f"{len(waiting)} test(s) worth {sum(t.max_points for t in waiting):g} points need a "
                              "GPU: not graded on this runner, and not counted in its max_score")
    return outcome


def timed_out(path: str, max_score: float, timeout: float) -> dict:
    return {"version": 1, "status": "error", "max_score": max_score, "tests": [],
            "message": f"{path}: the tests did not finish within {timeout:g} s and were stopped (an endless loop, "
                       "or far too slow?); run them locally with `make test` to see which one hangs"}


def run_file(path: str, max_score: float, timeout: float) -> dict:
    """Run the test file in a child process with a deadline; the reporter's view of what came of it."""
    from autograder.model.results import GradeReport

    with tempfile.TemporaryDirectory(prefix="classroom-step-") as tmp:
        target = Path(tmp) / "report.json"
        child = subprocess.Popen([sys.executable, "-m", "autograder.package.classroom_step", path, "--max-score",
                                  f"{max_score:g}", "--report-to", str(target)], start_new_session=True)
        try:
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return timed_out(path, max_score, timeout)
        finally:
            try:  # the whole session: whatever the tests started goes too
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.wait()
        report = GradeReport.from_json(target.read_text()) if target.is_file() else None
    return result(report, path, max_score)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="the public test file to run")
    parser.add_argument("--max-score", type=float, required=True, help="the file's points, as the workflow says")
    parser.add_argument("--timeout", type=float, default=STEP_TIMEOUT, help="seconds before the run is stopped")
    parser.add_argument("--report-to", help=argparse.SUPPRESS)  # the child: run pytest, write the report here
    args = parser.parse_args(argv)
    if args.report_to:
        results = _Results()
        pytest.main(["-q", "--tb=short", args.path], plugins=[results])
        if results.report is not None:
            Path(args.report_to).write_text(results.report.to_json())
        return 0
    outcome = run_file(args.path, args.max_score, args.timeout)
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
