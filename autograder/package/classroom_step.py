"""One grading step of the GitHub Classroom workflow: run one public test file, report its points.

    python -m autograder.package.classroom_step tests/resource_accounting/test_memory.py --max-score 19.5

It runs the file with pytest in a child process (pytest's usual output goes to the step's log, the
points table included), and then writes what GitHub Classroom's grading reporter reads from a step:
`result=<base64 JSON>` appended to $GITHUB_OUTPUT (printed as JSON when that is not set), in the
format of classroom-resources' graders: version 1, the step's status and max_score, and one entry
per test with its own score, so points are per test.

Each test has a deadline of its own (--test-timeout, 60 s by default: the grader's own budget for a call
into student code): a SIGALRM stops it there, failing that test alone with "timed out after 60 s" and
where its code was, and the file's other tests run and report as usual. An endless loop in one function
costs the tests that call it, not the file. The whole run has a deadline too (--timeout, 10 minutes by
default, under the step's timeout-minutes), for what a signal cannot stop (a loop inside compiled code,
code that blocks SIGALRM): the run is killed with everything it started and reported as an error that
names the test it was running, beside the tests that finished; the other steps report as usual. Tests
that need a GPU are left out of the step's tests and of its max_score on GitHub's runners (they have
none): the message says how many and how many points. It exits 0 once the result is written: the
reporter fails the run.

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
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

FAILING = ("failed", "error", "not_implemented")
STEP_TIMEOUT = 600.0  # seconds; the workflow gives each step a few minutes more
TEST_TIMEOUT = 60.0  # seconds each test may run (setup and call), as the grader allows a call into student code
REFIRE = 1.0  # seconds after which a timeout the test's code swallowed is raised again


class _Results:
    """A pytest plugin that writes the run's GradeReport to `target` after each test (what a run killed at its
    deadline leaves behind) and at the end, and the id of the test it is running to `running`."""

    def __init__(self, target: Path, running: Path) -> None:
        self.target, self.running = target, running

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.running.write_text(nodeid)

    def pytest_runtest_logfinish(self) -> None:
        self.running.write_text("")
        self._write()

    def pytest_sessionfinish(self) -> None:
        self._write()

    def _write(self) -> None:
        from autograder.harness.plugin import report_of

        try:
            report = report_of(self.config)
        except KeyError:  # the harness never configured (a usage error): no report, and the step says no test ran
            return
        partial = self.target.with_suffix(".partial")
        partial.write_text(report.to_json())
        partial.replace(self.target)  # whole or not at all: the parent may read it at any moment


class _Deadline:
    """A pytest plugin that stops each test's setup and call after `seconds` of wall-clock time: a SIGALRM
    raises pytest's Failed there ("timed out after N s" and the line the code was on), a BaseException that
    `except Exception` does not catch; code that swallows it anyway gets it again every REFIRE seconds. Only
    the main thread gets the signal, and pytest runs the tests there."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def _expired(self, signum, frame) -> None:
        where = ""
        if frame is not None:
            path = Path(frame.f_code.co_filename)
            shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
            where = f", in {frame.f_code.co_name} ({shown}:{frame.f_lineno})"
        raise pytest.fail.Exception(f"timed out after {self.seconds:g} s{where}: an endless loop, or far too slow? "
                                    f"Each test is stopped after {self.seconds:g} s", pytrace=False)

    @contextmanager
    def _armed(self) -> Iterator[None]:
        previous = signal.signal(signal.SIGALRM, self._expired)
        signal.setitimer(signal.ITIMER_REAL, self.seconds, REFIRE)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item):
        with self._armed():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        with self._armed():
            return (yield)


def result(report, path: str, max_score: float) -> dict:
    """The reporter's view of one step (a GradeReport of one test file)."""
    tests = report.tests if report is not None else []
    graded = [t for t in tests if t.status != "not_graded"]
    entries = _entries(graded, path)
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


def _entries(tests: list, path: str) -> list[dict]:
    return [{"name": t.name.split("::", 1)[-1], "status": "pass" if t.status == "passed" else "fail",
             "score": t.points, "message": t.message or t.status.replace("_", " "), "test_code": "",
             "filename": path, "line_no": 0, "duration": 0} for t in tests]


def timed_out(path: str, max_score: float, timeout: float, report=None, running: str = "") -> dict:
    """The reporter's view of a run stopped at its deadline: an error naming the test it was running, with the
    tests that finished before it (`report`, what the run left)."""
    finished = [t for t in (report.tests if report is not None else []) if t.status != "not_graded"]
    where = f" while running {running.split('::', 1)[-1]}" if running else ""
    return {"version": 1, "status": "error", "max_score": max_score, "tests": _entries(finished, path),
            "message": f"{path}: the tests did not finish within {timeout:g} s and were stopped{where}, which the "
                       "per-test timeout could not stop (a loop inside compiled code, or SIGALRM blocked?); run it "
                       "locally with `make test`"}


def run_file(path: str, max_score: float, timeout: float, test_timeout: float = TEST_TIMEOUT) -> dict:
    """Run the test file in a child process with a deadline, each test with one of its own; the reporter's view
    of what came of it."""
    from autograder.model.results import GradeReport

    with tempfile.TemporaryDirectory(prefix="classroom-step-") as tmp:
        target, running = Path(tmp) / "report.json", Path(tmp) / "running"
        child = subprocess.Popen([sys.executable, "-m", "autograder.package.classroom_step", path, "--max-score",
                                  f"{max_score:g}", "--test-timeout", f"{test_timeout:g}", "--report-to",
                                  str(target)], start_new_session=True)
        stopped = False
        try:
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stopped = True
        finally:
            try:  # the whole session: whatever the tests started goes too
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.wait()
        report = GradeReport.from_json(target.read_text()) if target.is_file() else None
        if stopped:
            return timed_out(path, max_score, timeout, report, running.read_text() if running.is_file() else "")
    return result(report, path, max_score)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="the public test file to run")
    parser.add_argument("--max-score", type=float, required=True, help="the file's points, as the workflow says")
    parser.add_argument("--timeout", type=float, default=STEP_TIMEOUT,
                        help=f"seconds before the whole run is stopped (default {STEP_TIMEOUT:g})")
    parser.add_argument("--test-timeout", type=float, default=TEST_TIMEOUT,
                        help=f"seconds before one test is stopped and fails (default {TEST_TIMEOUT:g})")
    parser.add_argument("--report-to", help=argparse.SUPPRESS)  # the child: run pytest, write the report here
    args = parser.parse_args(argv)
    if args.report_to:
        target = Path(args.report_to)
        pytest.main(["-q", "--tb=short", args.path],
                    plugins=[_Results(target, target.with_name("running")), _Deadline(args.test_timeout)])
        return 0
    outcome = run_file(args.path, args.max_score, args.timeout, args.test_timeout)
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
