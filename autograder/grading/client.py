"""Grade submissions: run the trusted runner in a fresh process and return its GradeReport.

The randomised tests' seed is the submission's (`seed_for`: its name and the course's secret), so a
regrade of the same submission draws the same inputs; `--seed` overrides it. Where every submission of a
channel has the same name, its caller names the student instead (`grade(seed_name=...)`: from Gradescope's
submission metadata, or nbgrader's student id), so that students do not share a seed. A report with tests the
machine was too busy to finish (`GradeReport.overloaded`, autograder/sandbox/cputime.py) is graded
again before anything is kept; one that still cannot finish is a grader error (no tests, the reason in its
log), never a score.

`grade` runs one submission in a runner of its own. A batch uses `ServerPool`: one long-lived runner
(`python -m autograder.grading.runner --serve`) per worker thread, which keeps torch, the reference and the
test modules imported and forks a clean child per submission (the next one while the current one
grades, unless `overlap=False`). Either way, if the runner fails (a bug of the grader, or the
overall time limit), the report says so and has no tests, so a batch records the submission as an
error and grades it again on the next run.

Each runner holds a lifeline to this process (`_start_runner`): it ends, stopping its workers and
removing its stages, as soon as this process ends, even killed with SIGKILL. This process ends a
runner with SIGTERM (`_end_runner`), which lets it clean up, and kills it only if it does not.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from autograder.grading import stages
from autograder.model.results import GRADER_FAULT, GradeReport
from autograder.grading.intake import submission_name

ROOT = Path(__file__).resolve().parents[2]
OVERALL_LIMIT = 3600.0
RUNNER_PATIENCE = 60.0  # seconds a runner asked to end (SIGTERM) has to clean up before it is killed
OVERLOAD_ATTEMPTS = 2  # gradings of one submission before an overloaded one is a grader error, never a score
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


def seed_for(name: str, secret: str = "") -> int:
    """The seed of a submission's randomised tests: from its name and the course's secret, the same on
    every grading (a course file's [grading] seed_secret keeps students from computing each other's)."""
    digest = hashlib.sha256(f"{secret}\0{name}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big") % 2**31


def _runner_env() -> dict[str, str]:
    """The runner's environment: a fixed hash seed, so that what pytest prints of sets and dicts (its
    assertion diffs, in the students' feedback) is the same on every grading, as the worker's already is; and
    no plugin loaded from the installed packages' entry points, neither pytest's (pytest-randomly, anyio,
    hypothesis's) nor Hypothesis's own (trio registers one; any may load a settings profile of fewer examples),
    so that the plugins a machine happens to have neither change a grade nor cost each runner their imports (a
    quarter of the grader's CPU on resource_accounting; trio's, 0.3 s). The runner names the plugins it uses."""
    return {**os.environ, "PYTHONHASHSEED": "0", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "HYPOTHESIS_NO_PLUGINS": "1"}


def _start_runner(arguments: list[str], **popen) -> tuple[subprocess.Popen, int]:
    """A runner process, and the write end of its lifeline: the runner ends itself once that closes, which
    the kernel does when this process exits, however (autograder.grading.runner.watch_client). Close it
    once the runner is done."""
    read, write = os.pipe()  # neither end inheritable: only the runner gets `read`, by pass_fds
    try:
        command = [sys.executable, "-m", "autograder.grading.runner", *arguments, "--lifeline", str(read)]
        proc = subprocess.Popen(command, cwd=ROOT, env=_runner_env(), pass_fds=(read,), **popen)
    except BaseException:
        os.close(write)
        raise
    finally:
        os.close(read)
    return proc, write


def _end_runner(proc: subprocess.Popen, patience: float = RUNNER_PATIENCE) -> None:
    """End a runner that is still running: SIGTERM, on which it stops its workers and removes its stages;
    SIGKILL if it has not ended within `patience` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=patience)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _options(call_timeout: float, sandbox: str) -> list[str]:
    return ["--timeout", str(call_timeout), "--sandbox", sandbox]


def _job(submission: Path, report: Path, assignment: str | None, select: str | None, seed: int | None) -> dict:
    return {"submission": str(submission), "report": str(report),
            "assignments": [assignment] if assignment else None, "select": select, "seed": seed}


def _result(submission: Path, target: Path, failure: str, seed: int) -> GradeReport:
    if target.exists() and not failure:
        return GradeReport.from_json(target.read_text())
    return GradeReport(submission=submission_name(submission), seed=seed,
                       log=[f"the grader failed on this submission ({failure or 'no report written'})"])


def _finish(report: GradeReport, started: float, out: Path | None, released: dict | None = None) -> GradeReport:
    report.execution_time = time.monotonic() - started
    if out is not None:
        from autograder.report import write_all

        write_all(report, Path(out), released)
    return report


def grade(submission: Path, out: Path | None = None, assignment: str | None = None, *,
          call_timeout: float = 60.0, sandbox: str = "auto", select: str | None = None,
          seed: int | None = None, secret: str = "", released: dict | None = None,
          seed_name: str | None = None) -> GradeReport:
    """Grade one submission in a runner process of its own; once more if the machine was overloaded. The
    files written to `out` hold the answers of the assignments in `released` (autograder.cohort.answers)."""
    started = time.monotonic()
    submission = Path(submission).resolve()
    seed = seed if seed is not None else seed_for(seed_name or submission_name(submission), secret)
    notes: list[str] = []  # the attempts that met an overloaded machine, said in the report that is kept
    for attempt in range(OVERLOAD_ATTEMPTS):
        report = _grade_once(submission, assignment, call_timeout, sandbox, select, seed)
        if not report.overloaded:
            break
        notes.append(f"attempt {attempt + 1}: the grader was overloaded in {len(report.overloaded)} test(s)")
    report.log.extend(notes)
    if report.overloaded:  # never a score built from tests the machine could not finish: a grader error
        report = GradeReport(submission=report.submission, seed=report.seed,
                             log=[*report.log, f"the grader failed on this submission ({overload_message(report)})"])
    return _finish(report, started, out, released)


def overload_message(report: GradeReport) -> str:
    """Why a report with tests the machine was too busy to finish (GradeReport.overloaded) is no grade."""
    shown = ", ".join(report.overloaded[:3]) + (" ..." if len(report.overloaded) > 3 else "")
    faults = [t.message for t in report.tests
              if t.name in report.overloaded and GRADER_FAULT in t.message]
    if faults:  # process.GraderFault: the sandbox itself is broken here, and no busy machine explains it
        return (f"grader fault: {len(report.overloaded)} test(s) could not run ({shown}): {faults[0][:600]}; "
                "the protections that `python -m autograder grade` prints say what this machine's sandbox is; "
                "mend it before grading again")
    return (f"grader overloaded: {len(report.overloaded)} test(s) could not finish on this machine ({shown}), "
            "though the submission stayed within its CPU budget; grade with fewer --workers or on a less busy "
            "machine")


def _grade_once(submission: Path, assignment: str | None, call_timeout: float, sandbox: str, select: str | None,
                seed: int) -> GradeReport:
    with tempfile.TemporaryDirectory(prefix=stages.prefix("report")) as tmp:
        target = Path(tmp) / "report.json"
        job = _job(submission, target, assignment, select, seed)
        arguments = [job["submission"], "--report", job["report"], *_options(call_timeout, sandbox),
                     "--seed", str(seed)]
        arguments += ["--assignment", assignment] if assignment else []
        arguments += ["--select", select] if select else []
        proc, lifeline = _start_runner(arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, errors = proc.communicate(timeout=OVERALL_LIMIT)
            failure = "" if target.exists() else f"exit code {proc.returncode}"
            if failure:  # the grader's own traceback is for the instructor's terminal, never the student's report
                sys.stderr.write(errors[-3000:])
        except subprocess.TimeoutExpired:
            failure = f"grading took longer than {OVERALL_LIMIT:g} s"
        finally:  # a timeout, or Ctrl-C here: the runner cleans up before it goes
            _end_runner(proc)
            os.close(lifeline)
        return _result(submission, target, failure, seed)


class GradingServer:
    """One `runner --serve` process: submissions go in one at a time, reports come out."""

    def __init__(self, call_timeout: float = 60.0, sandbox: str = "auto", overlap: bool = True) -> None:
        self.options = _options(call_timeout, sandbox) + ([] if overlap else ["--no-overlap"])
        self.proc: subprocess.Popen | None = None
        self.lifeline: int | None = None
        self.busy = False  # a submission is being graded (close then ends the runner rather than wait)
        self.tmp = tempfile.TemporaryDirectory(prefix=stages.prefix("reports"))
        self.count = 0

    def grade(self, submission: Path, assignment: str | None = None, select: str | None = None,
              seed: int | None = None, secret: str = "", *, seed_name: str | None = None, out: Path | None = None,
              released: dict | None = None) -> GradeReport:
        """Grade one submission (its own seed unless `seed` is given, drawn from `seed_name` where the folder's
        name is not the student's); the caller regrades an overloaded report with less running beside it
        (autograder.cohort.batch). The files written to `out` hold the answers of the assignments in `released`."""
        started = time.monotonic()
        submission = Path(submission).resolve()
        seed = seed if seed is not None else seed_for(seed_name or submission_name(submission), secret)
        self.count += 1
        target = Path(self.tmp.name) / f"report-{self.count}.json"
        failure = self._exchange(_job(submission, target, assignment, select, seed))
        return _finish(_result(submission, target, failure, seed), started, out, released)

    def _exchange(self, job: dict) -> str:
        """Hand one job to the runner (started here where none is running) and wait for its answer: "" where it
        says it wrote the report, else what went wrong."""
        if self.proc is None or self.proc.poll() is not None:
            self._release()
            self.proc, self.lifeline = _start_runner(["--serve", *self.options], stdin=subprocess.PIPE,
                                                     stdout=subprocess.PIPE, text=True)
        self.busy = True
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            reply = json.loads(self.proc.stdout.readline() or "{}")
            return "" if reply.get("status") == 0 else f"the runner answered {reply or 'nothing'}"
        except (OSError, ValueError) as exc:
            return f"the grading server failed: {exc}"
        finally:
            self.busy = False

    def close(self, timeout: float = 120.0) -> None:
        """End the server: it cleans up its prestarted child; one that does not finish in time is ended.
        While a submission is being graded (the batch was interrupted), it is ended at once."""
        try:
            if self.proc is not None and self.busy:
                _end_runner(self.proc)
            elif self.proc is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:  # it had its time: SIGTERM, then SIGKILL as soon
                    _end_runner(self.proc, patience=min(RUNNER_PATIENCE, timeout))
        finally:
            self._release()
            self.tmp.cleanup()

    def _release(self) -> None:
        """Let go of the lifeline of a runner that has ended."""
        if self.lifeline is not None:
            os.close(self.lifeline)
            self.lifeline = None


class ServerPool:
    """One GradingServer per calling thread (a batch's worker threads), closed together."""

    def __init__(self, call_timeout: float = 60.0, sandbox: str = "auto", select: str | None = None,
                 overlap: bool = True, seed: int | None = None, secret: str = "") -> None:
        self.options, self.select = {"call_timeout": call_timeout, "sandbox": sandbox, "overlap": overlap}, select
        self.seed, self.secret = seed, secret
        self.local, self.servers, self.lock = threading.local(), [], threading.Lock()

    def grade(self, submission: Path, **where) -> GradeReport:
        """Grade one submission on this thread's server, with the pool's selection, seed and secret; `where`:
        GradingServer.grade's assignment, seed_name, out and released."""
        server = getattr(self.local, "server", None)
        if server is None:
            server = self.local.server = GradingServer(**self.options)
            with self.lock:
                self.servers.append(server)
        return server.grade(submission, select=self.select, seed=self.seed, secret=self.secret, **where)

    def close(self) -> None:
        """Close every server, even when closing one of them fails."""
        with contextlib.ExitStack() as stack:
            for server in self.servers:
                stack.callback(server.close)
