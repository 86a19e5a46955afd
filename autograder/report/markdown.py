"""Markdown feedback for one student: a summary table per assignment, then each visible test.

Hidden tests (visibility "hidden") appear only as a count and a points total: their names and
messages would give away the hidden suite. Messages and log lines come from student code, so they
go into fenced code blocks whose fence is longer than any backtick run inside; nothing a student
prints can close the block and inject Markdown or HTML.
"""

from __future__ import annotations

import re

from autograder.report.text import clean, points, reason, short_name
from autograder.results import GradeReport, TestResult


def fenced(text: str, info: str = "text") -> str:
    text = clean(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def code(text: str) -> str:
    """`text` as one inline code span (on one line), safe in a table cell and a heading."""
    text = " ".join(clean(text).split()).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _line(text: str) -> str:
    """Trusted text (a test's docstring) on one line."""
    return " ".join(text.split())


def _summary(tests: list[TestResult]) -> list[str]:
    shown = [t for t in tests if t.visibility != "hidden"]
    hidden = [t for t in tests if t.visibility == "hidden"]
    lines = ["| test | status | points |", "|---|---|---:|"]
    lines += [f"| {code(short_name(t))} | {reason(t)} | {points(t.points)} / {points(t.max_points)} |"
              for t in shown]
    if hidden:
        got, total = sum(t.points for t in hidden), sum(t.max_points for t in hidden)
        lines.append(f"| {len(hidden)} hidden test{'s' * (len(hidden) != 1)} | | "
                     f"{points(got)} / {points(total)} |")
    return lines


def _details(test: TestResult) -> list[str]:
    lines = [f"#### {code(short_name(test))}", ""]
    if test.checks:
        lines += [f"Checks: {_line(test.checks)}", ""]
    lines += [f"Status: **{reason(test)}** ({points(test.points)} / {points(test.max_points)} points)", ""]
    if test.status != "passed":
        message = test.message.strip()
        if message and message != reason(test):
            label = "Expected vs got" if test.status == "failed" else "Message"
            lines += [f"{label}:", "", fenced(message), ""]
        if test.hint:
            lines += [f"Hint: {_line(test.hint)}", ""]
    return lines


def feedback_markdown(report: GradeReport) -> str:
    lines = [f"# Feedback: {code(report.submission)}", "",
             f"Score: **{points(report.score)} / {points(report.max_score)}** points", ""]
    for assignment, tests in report.by_assignment().items():
        got, total = sum(t.points for t in tests), sum(t.max_points for t in tests)
        lines += [f"## {code(assignment)}: {points(got)} / {points(total)} points", ""]
        lines += _summary(tests) + [""]
        shown = [t for t in tests if t.visibility != "hidden"]
        if shown:
            lines += ["### Tests", ""]
            for test in shown:
                lines += _details(test)
    if report.log:
        lines += ["## Grading notes", "", fenced("\n".join(report.log)), ""]
    return "\n".join(lines)
