"""Grade one submission: run the trusted runner in a fresh process and return its GradeReport.

A fresh interpreter per submission keeps pytest's state and the reference's imports from leaking
between submissions, and lets a batch grade several at once. If the runner itself fails (a bug of
the grader, or the overall time limit), the report says so and has no tests, so a batch records the
submission as an error and grades it again on the next run.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.results import GradeReport
from autograder.submission import submission_name

ROOT = Path(__file__).resolve().parents[1]
OVERALL_LIMIT = 3600.0


def grade(submission: Path, out: Path | None = None, assignment: str | None = None, *,
          call_timeout: float = 60.0, sandbox: str = "auto", select: str | None = None,
          seed: int | None = None) -> GradeReport:
    started = time.monotonic()
    submission = Path(submission).resolve()
    with tempfile.TemporaryDirectory(prefix="llmsys-report-") as tmp:
        target = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "autograder.runner", str(submission), "--report", str(target),
                   "--timeout", str(call_timeout), "--sandbox", sandbox]
        if assignment:
            command += ["--assignment", assignment]
        if select:
            command += ["--select", select]
        if seed is not None:
            command += ["--seed", str(seed)]
        try:
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=OVERALL_LIMIT)
            failure = "" if target.exists() else f"exit code {done.returncode}: {done.stderr[-3000:]}"
        except subprocess.TimeoutExpired:
            failure = f"grading took longer than {OVERALL_LIMIT:g} s"
        if failure:
            report = GradeReport(submission=submission_name(submission),
                                 log=[f"the grader failed on this submission ({failure})"])
        else:
            report = GradeReport.from_json(target.read_text())
    report.execution_time = time.monotonic() - started
    if out is not None:
        from autograder.report import write_all

        write_all(report, Path(out))
    return report
