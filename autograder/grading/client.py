"""Grade submissions: run the trusted runner in a fresh process and return its GradeReport.

`grade` runs one submission in a runner of its own. A batch uses `ServerPool`: one long-lived runner
(`python -m autograder.grading.runner --serve`) per worker thread, which keeps torch, the reference and the
test modules imported and forks a clean child per submission (the next one while the current one
grades, unless `overlap=False`). Either way, if the runner fails (a bug of the grader, or the
overall time limit), the report says so and has no tests, so a batch records the submission as an
error and grades it again on the next run.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from autograder.grading.results import GradeReport
from autograder.grading.intake import submission_name

ROOT = Path(__file__).resolve().parents[2]
OVERALL_LIMIT = 3600.0
OVERLAP_CHOICES = ("auto", "always", "never")


def cores() -> int:
    """The cores this process may run on (a container's share, where the platform says)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def overlaps(choice: str, workers: int, available: int | None = None) -> bool:
    """Whether each grading server boots the next submission's sandbox while the current one grades.

    Overlapping keeps about two cores busy per worker: "auto" overlaps only where every worker has
    that second core (2 x workers <= cores); otherwise the workers would only slow each other down.
    """
    if choice not in OVERLAP_CHOICES:
        raise ValueError(f"overlap must be one of {', '.join(OVERLAP_CHOICES)}, got {choice!r}")
    if choice == "auto":
        return 2 * workers <= (available if available is not None else cores())
    return choice == "always"


def _options(call_timeout: float, sandbox: str) -> list[str]:
    return ["--timeout", str(call_timeout), "--sandbox", sandbox]


def _job(submission: Path, report: Path, assignment: str | None, select: str | None, seed: int | None) -> dict:
    return {"submission": str(submission), "report": str(report),
            "assignments": [assignment] if assignment else None, "select": select, "seed": seed}


def _result(submission: Path, target: Path, failure: str, started: float, out: Path | None) -> GradeReport:
    if target.exists() and not failure:
        report = GradeReport.from_json(target.read_text())
    else:
        report = GradeReport(submission=submission_name(submission),
                             log=[f"the grader failed on this submission ({failure or 'no report written'})"])
    report.execution_time = time.monotonic() - started
    if out is not None:
        from autograder.report import write_all

        write_all(report, Path(out))
    return report


def grade(submission: Path, out: Path | None = None, assignment: str | None = None, *,
          call_timeout: float = 60.0, sandbox: str = "auto", select: str | None = None,
          seed: int | None = None) -> GradeReport:
    """Grade one submission in a runner process of its own."""
    started = time.monotonic()
    submission = Path(submission).resolve()
    with tempfile.TemporaryDirectory(prefix="llmsys-report-") as tmp:
        target = Path(tmp) / "report.json"
        job = _job(submission, target, assignment, select, seed)
        command = [sys.executable, "-m", "autograder.grading.runner", job["submission"], "--report", job["report"],
                   *_options(call_timeout, sandbox)]
        command += ["--assignment", assignment] if assignment else []
        command += ["--select", select] if select else []
        command += ["--seed", str(seed)] if seed is not None else []
        try:
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=OVERALL_LIMIT)
            failure = "" if target.exists() else f"exit code {done.returncode}"
            if failure:  # the grader's own traceback is for the instructor's terminal, never the student's report
                sys.stderr.write(done.stderr[-3000:])
        except subprocess.TimeoutExpired:
            failure = f"grading took longer than {OVERALL_LIMIT:g} s"
        return _result(submission, target, failure, started, out)


class GradingServer:
    """One `runner --serve` process: submissions go in one at a time, reports come out."""

    def __init__(self, call_timeout: float = 60.0, sandbox: str = "auto", overlap: bool = True) -> None:
        self.options = _options(call_timeout, sandbox) + ([] if overlap else ["--no-overlap"])
        self.proc: subprocess.Popen | None = None
        self.tmp = tempfile.TemporaryDirectory(prefix="llmsys-reports-")
        self.count = 0

    def grade(self, submission: Path, assignment: str | None = None, select: str | None = None,
              seed: int | None = None) -> GradeReport:
        started = time.monotonic()
        submission = Path(submission).resolve()
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, "-m", "autograder.grading.runner", "--serve", *self.options],
                                         cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.count += 1
        target = Path(self.tmp.name) / f"report-{self.count}.json"
        try:
            self.proc.stdin.write(json.dumps(_job(submission, target, assignment, select, seed)) + "\n")
            self.proc.stdin.flush()
            reply = json.loads(self.proc.stdout.readline() or "{}")
            failure = "" if reply.get("status") == 0 else f"the runner answered {reply or 'nothing'}"
        except (OSError, ValueError) as exc:
            failure = f"the grading server failed: {exc}"
        return _result(submission, target, failure, started, None)

    def close(self, timeout: float = 120.0) -> None:
        """End the server: it cleans up its prestarted child; one that does not finish in time is killed."""
        try:
            if self.proc is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            self.tmp.cleanup()


class ServerPool:
    """One GradingServer per calling thread (a batch's worker threads), closed together."""

    def __init__(self, call_timeout: float = 60.0, sandbox: str = "auto", select: str | None = None,
                 overlap: bool = True) -> None:
        self.options, self.select = {"call_timeout": call_timeout, "sandbox": sandbox, "overlap": overlap}, select
        self.local, self.servers, self.lock = threading.local(), [], threading.Lock()

    def grade(self, submission: Path) -> GradeReport:
        server = getattr(self.local, "server", None)
        if server is None:
            server = self.local.server = GradingServer(**self.options)
            with self.lock:
                self.servers.append(server)
        return server.grade(submission, select=self.select)

    def close(self) -> None:
        """Close every server, even when closing one of them fails."""
        with contextlib.ExitStack() as stack:
            for server in self.servers:
                stack.callback(server.close)
