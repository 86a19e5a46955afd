"""The trusted grading run of one submission: tests here, student code in a sandboxed worker.

    python -m autograder.runner SUBMISSION --report PATH [--assignment NAME] [--timeout S]

Steps, each a function below: open the submission into a clean copy; scan it for forbidden APIs;
build the worker library; run the public tests and the hidden suites with pytest in this process,
with the `student` fixture answered by the worker; write the GradeReport as JSON. This process holds
the reference solutions (on sys.path, for the `reference` fixture) and never imports student code.
`autograder.grade` runs it as a subprocess, so that every submission gets a fresh interpreter.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import kernels  # noqa: F401  (Triton's mode, before anything else)
from autograder import checks
from autograder.results import GradeReport
from autograder.sandbox import policy, staging
from autograder.sandbox.process import RemoteStudent, Worker
from autograder.submission import open_submission
from kernels import impl
from kernels.device import has_cuda

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"


def known_assignments() -> list[str]:
    return impl.packages(SOLUTIONS)


def rules_of(assignment: str) -> list:
    try:
        return list(importlib.import_module(f"autograder.suites.{assignment}.rules").RULES)
    except ModuleNotFoundError:
        return []


def test_paths(assignment: str) -> list[str]:
    paths = [ROOT / "tests" / assignment, ROOT / "autograder" / "suites" / assignment]
    return [str(p) for p in paths if p.is_dir()]


@dataclass(eq=False)  # pytest keeps plugins in sets: hash by identity
class GraderPlugin:
    """Gives the harness its remote student, and fails tests whose task broke a static check."""

    student: RemoteStudent
    violations: list = field(default_factory=list)
    report: GradeReport | None = None

    @pytest.hookimpl
    def pytest_llmsys_student(self, config: pytest.Config) -> RemoteStudent:
        return self.student

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        marker = item.get_closest_marker("task")
        found = checks.blocked(self.violations, marker.args[0] if marker else "")
        if found:
            pytest.fail("static check: " + "; ".join(v.message for v in found), pytrace=False)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from autograder.harness.plugin import report_of  # imported by pytest first, for assert rewriting

        self.report = report_of(session.config)


def scan(submission, assignments: list[str]) -> list:
    found = []
    for name in assignments:
        if name in submission.packages:
            found += checks.scan(submission.root / name, name, rules_of(name))
    return found


def run(source: Path, assignments: list[str] | None, timeout: float, sandbox: str, stage: Path,
        select: str | None = None, seed: int | None = None) -> GradeReport:
    started = time.monotonic()
    gpu = has_cuda()
    limits = policy.Limits(call_timeout=timeout, address_space=None if gpu else policy.Limits.address_space)
    protections = policy.detect(sandbox, limits)
    submission = open_submission(source, stage, known_assignments())
    chosen = assignments or submission.packages or known_assignments()
    violations = scan(submission, chosen)
    lib = staging.build_lib(stage / "lib", chosen)
    worker = Worker(lib, submission.root, stage / "scratch", protections, gpu)
    worker.prestart()  # boots while pytest collects the tests
    grader = GraderPlugin(RemoteStudent(worker, timeout), violations)
    impl.activate(SOLUTIONS)
    args = ["-q", "--no-header", "--tb=short", "-p", "no:cacheprovider", f"--rootdir={ROOT}"]
    args += ["-k", select] if select else []
    args += ["--seed", str(seed)] if seed is not None else []
    try:
        code = pytest.main(args + [p for a in chosen for p in test_paths(a)], plugins=[grader])
    finally:
        worker.stop()
    report = grader.report or GradeReport(submission="")
    report.submission = submission.name
    report.log = (protections.lines() + [f"assignments graded: {', '.join(chosen)}"]
                  + submission.problems + [f"static check: {v.message}" for v in violations]
                  + report.log + [f"worker started {worker.starts} time(s); pytest exit code {int(code)}"])
    report.execution_time = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade one submission (trusted side).")
    parser.add_argument("submission", type=Path)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--assignment", action="append")
    parser.add_argument("--timeout", type=float, default=policy.Limits.call_timeout)
    parser.add_argument("--sandbox", choices=policy.MODES, default="auto")
    parser.add_argument("--select", help="only the tests matching this pytest -k expression")
    parser.add_argument("--seed", type=int, help="the seed of the randomised tests (default: random)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="llmsys-grade-") as tmp:
        os.chmod(tmp, 0o755)
        report = run(args.submission, args.assignment, args.timeout, args.sandbox, Path(tmp), args.select, args.seed)
    args.report.write_text(report.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
