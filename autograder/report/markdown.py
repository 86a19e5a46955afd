"""Markdown feedback for one student, in the order a student reads it.

1. The score out of the maximum (autograder.report.parts: the one rule), the points of it awaiting hand
   grading, and the points needing a GPU, not graded here and not counted. A submission that is not
   gradable (a corrupt zip, an empty folder) gets its reason first, and no score.
2. One row per assignment: score / maximum, passed, to fix, not implemented, awaiting hand grading,
   not graded (GPU), hidden tests.
3. What to fix: each failing test function with what it checks, the message (expected and got, the
   first lines of it) and the hint; further failing cases of the same function one line each.
4. Tests not implemented yet, then the not-graded ones: one line per test function (its parametrised
   cases counted, not repeated); then the passed ones, one line per test file naming its functions.
   Written answers graded by hand: each with its points and the grader's comment; those still to be
   graded are counted in the score line ("z by hand still to grade").
5. Once an assignment's answers are released (`released`: its AnswerKey, autograder/report/answers.py),
   its answers: the written questions' keys and model answers, each hidden test with what it checks and
   the points it gave.
6. The grading notes (the protections that were active, the seed).

Hidden tests (visibility "hidden") appear only as counts and points: their names and messages would
give away the hidden suite. So do the tests visible after the due date (or once published) until
their assignment's answers are released; then they are shown like the others. Messages and log lines
come from student code, so they go into fenced code blocks whose fence is longer than any backtick run
inside; nothing a student prints can close the block and inject Markdown or HTML.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping

from autograder.report.parts import fraction, parts_of, tail
from autograder.report.text import clean, points, reason, short_name
from autograder.model.results import GradeReport, TestResult
from autograder.report.answers import AnswerKey, key_markdown

MESSAGE_LINES = 6  # of a failure's message in the feedback; the full text is in report.json and junit.xml
TO_FIX = ("failed", "error")


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


def concealed(test: TestResult, released: Mapping[str, AnswerKey]) -> bool:
    """Shown only as a count: a hidden test, or one visible after the due date (or once published) while its
    assignment's answers are not released."""
    return test.visibility == "hidden" or (test.visibility != "visible" and test.assignment not in released)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


def function_of(test: TestResult) -> str:
    """The test function: the short name without its parametrisation."""
    return short_name(test).split("[", 1)[0]


def by_function(tests: list[TestResult]) -> "OrderedDict[str, list[TestResult]]":
    groups: OrderedDict[str, list[TestResult]] = OrderedDict()
    for test in tests:
        groups.setdefault(function_of(test), []).append(test)
    return groups


def cut(message: str, lines: int = MESSAGE_LINES) -> str:
    """The first `lines` non-blank lines of a message, saying how many more there were."""
    kept = [line for line in message.strip().splitlines() if line.strip()]
    if len(kept) <= lines:
        return "\n".join(kept)
    return "\n".join(kept[:lines] + [f"... ({len(kept) - lines} more lines)"])


def _one_line(name: str, group: list[TestResult], note: str = "") -> str:
    got, total = sum(t.points for t in group), sum(t.max_points for t in group)
    cases = f"{len(group)} cases, " if len(group) > 1 else ""
    return f"- {code(name)} ({cases}{points(got)} / {points(total)}){note}"


def _passed_by_file(group: "OrderedDict[str, list[TestResult]]") -> list[str]:
    """One line per test file: its points and each passed test function (cases counted)."""
    files: OrderedDict[str, list[str]] = OrderedDict()
    totals: dict[str, float] = {}
    for name, tests in group.items():
        path, _, function = name.partition("::")
        if not function:  # a written answer's part (written/Q6.1.a): listed together
            path, function = "written answers", path
        files.setdefault(path, []).append(code(function) + (f" ({len(tests)} cases)" if len(tests) > 1 else ""))
        totals[path] = totals.get(path, 0.0) + sum(t.points for t in tests)
    return [f"- {code(path)} ({points(totals[path])} / {points(totals[path])}): " + ", ".join(functions)
            for path, functions in files.items()]


def _first_line(test: TestResult) -> str:
    return next((line.strip() for line in test.message.splitlines() if line.strip()), reason(test))


def _failure(name: str, group: list[TestResult]) -> list[str]:
    first, others = group[0], group[1:]
    lines = [f"### {code(short_name(first))}: {reason(first)}, {points(first.points)} / {points(first.max_points)}"]
    if first.checks:
        lines.append(f"Checks: {_line(first.checks)}")
    message = first.message.strip()
    if message and message != reason(first):
        lines.append(fenced(cut(message)))
    if first.hint:
        lines.append(f"Hint: {_line(first.hint)}")
    for test in others:
        lines.append(f"- also {code(short_name(test))} ({points(test.points)} / {points(test.max_points)}): "
                     f"{code(_first_line(test)[:160])}")
    return lines + [""]


def _gpu_sentence(waiting: list[TestResult]) -> str:
    total = sum(t.max_points for t in waiting)
    one = len(waiting) == 1
    return (f"{points(total)} more points come from {_plural(len(waiting), 'test')} that "
            f"{'needs' if one else 'need'} a GPU: {'it is' if one else 'they are'} not graded here (this machine "
            "has none), so they count neither for nor against this score.")


def _table(report: GradeReport, released: Mapping[str, AnswerKey]) -> list[str]:
    lines = ["| assignment | score / maximum | passed | to fix | not implemented | awaiting hand grading "
             "| not graded (GPU) | hidden tests |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for assignment, tests in report.by_assignment().items():
        parts = parts_of(tests)
        graded = [t for t in tests if t.status not in ("not_graded", "manual")]
        waiting = [t for t in tests if t.status == "not_graded"]
        hidden = [t for t in graded if concealed(t, released)]
        count = {s: sum(t.status == s for t in tests) for s in ("passed", "not_implemented")}
        gpu = f"{len(waiting)} ({points(sum(t.max_points for t in waiting))} points)" if waiting else "0"
        secret = (f"{len(hidden)} ({points(sum(t.points for t in hidden))} / "
                  f"{points(sum(t.max_points for t in hidden))})") if hidden else "0"
        lines.append(f"| {code(assignment)} | {fraction(parts)} | {count['passed']} | "
                     f"{sum(t.status in TO_FIX for t in tests)} | {count['not_implemented']} | "
                     f"{points(parts.by_hand)} | {gpu} | {secret} |")
    return lines + [""]


def _by_hand(tests: list[TestResult]) -> list[str]:
    """The written answers graded by hand (points and comment) and those still to be graded."""
    done = [t for t in tests if t.status == "hand_graded"]
    todo = [t for t in tests if t.status == "manual"]
    lines = []
    if done:
        lines += [f"## Graded by hand: {_plural(len(done), 'answer')}", ""]
        for test in done:
            lines.append(f"- {code(test.name)} ({points(test.points)} / {points(test.max_points)})")
            if test.message.strip():
                lines.append(fenced(cut(test.message, 20)))
        lines.append("")
    if todo:
        lines += [f"## To be graded by hand: {_plural(len(todo), 'answer')}", ""]
        lines += [f"- {code(t.name)} ({points(t.max_points)} points)" for t in todo] + [""]
    return lines


def _not_graded(report: GradeReport) -> list[str]:
    """The first lines of a report with no score: not gradable (and why), or the grader failed."""
    if report.not_gradable:
        return [f"**Not gradable**: {code(report.not_gradable)}", "",
                "Nothing of this submission could be graded, so it has no score (it is not a 0): fix what the "
                "line above says and submit again.", ""]
    return ["**Not graded yet**: the grader could not complete this submission (its own failure, not the "
            "submission's score); it is graded again. The grading notes below say what happened.", ""]


def _answers(report: GradeReport, released: Mapping[str, AnswerKey]) -> list[str]:
    """The released answers of the report's assignments, with the points each hidden test gave."""
    return [key_markdown(released[name], 2, tests) for name, tests in report.by_assignment().items()
            if name in released]


def feedback_markdown(report: GradeReport, released: Mapping[str, AnswerKey] | None = None) -> str:
    """The feedback; `released`: the AnswerKey of each assignment whose answers students may see now."""
    released = released or {}
    if report.not_gradable or not report.tests:
        lines = [f"# Feedback: {code(report.submission)}", "", *_not_graded(report)]
        return "\n".join(lines + (["## Grading notes", "", fenced("\n".join(report.log)), ""] if report.log else []))
    waiting = [t for t in report.tests if t.status == "not_graded"]
    parts = parts_of(report.tests)
    lines = [f"# Feedback: {code(report.submission)}", "", f"Score: **{fraction(parts)}** points{tail(parts)}.", ""]
    lines += _table(report, released) if report.tests else []
    shown = [t for t in report.tests if not concealed(t, released)]
    fix = by_function([t for t in shown if t.status in TO_FIX])
    hidden_fix = sum(t.status in TO_FIX for t in report.tests if concealed(t, released))
    if fix or hidden_fix:
        lines += [f"## To fix: {_plural(sum(map(len, fix.values())), 'test')}"
                  + (f" (and {hidden_fix} hidden)" if hidden_fix else ""), ""]
        for name, group in fix.items():
            lines += _failure(name, group)
    lines += _by_hand(shown)
    sections = (("not_implemented", "Not implemented yet"), ("not_graded", "Not graded here (needs a GPU)"),
                ("skipped", "Skipped"), ("passed", "Passed"))
    for status, title in sections:
        group = by_function([t for t in shown if t.status == status])
        hidden = sum(t.status == status for t in report.tests if concealed(t, released))
        if not group and not hidden:
            continue
        count = sum(map(len, group.values()))
        lines += [f"## {title}: {_plural(count, 'test')}" + (f" (and {hidden} hidden)" if hidden else ""), ""]
        if status == "not_graded":
            lines += [_gpu_sentence(waiting), ""]
        if status == "passed":
            lines += _passed_by_file(group)
        for name, tests in group.items() if status != "passed" else ():
            note = f": {code(_first_line(tests[0])[:120])}" if status in ("not_implemented", "skipped") else ""
            lines.append(_one_line(name, tests, note))
        lines.append("")
    lines += _answers(report, released)
    if report.log:
        lines += ["## Grading notes", "", fenced("\n".join(report.log)), ""]
    return "\n".join(lines)
