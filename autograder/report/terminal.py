"""The terminal view: per assignment, a rich Table of the tests that did not pass (one row per test
function) and a count of those that did; then the per-assignment summary lines and the log.

Every cell built from a report is a `rich.text.Text`, never a markup string: a student's message
such as "[link=...]" or "[/]" must print as it is, not be interpreted by rich.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from autograder.report.gradebook import SCORED, final_total
from autograder.report.markdown import by_function
from autograder.report.parts import NONE, Parts, by_assignment, describe, fraction, parts_of
from autograder.report.text import REASONS, clean, points
from autograder.model.results import GradeReport, TestResult

STYLES = {
    "passed": "green",
    "failed": "red",
    "not_implemented": "yellow",
    "error": "bold red",
    "not_graded": "cyan",
    "skipped": "dim",
    "manual": "magenta",
    "hand_graded": "blue",
}
SHORT_MESSAGE = 100


def _fit(lines: list[str]) -> str:
    line = clean(lines[0].strip()) if lines else ""
    return line if len(line) <= SHORT_MESSAGE else line[: SHORT_MESSAGE - 3] + "..."


def short_message(test: TestResult) -> str:
    """The message's first non-empty line (e.g. `AssertionError: expected 12, got 10`), cut to fit."""
    return _fit([line for line in test.message.splitlines() if line.strip()])


def assignment_table(assignment: str, tests: list[TestResult]) -> Table:
    """The tests that did not pass, one row per test function (its parametrised cases counted);
    the passed ones are counted below the table, not listed."""
    passed = [t for t in tests if t.status == "passed"]
    caption = f"{len(passed)} passed ({points(sum(t.points for t in passed))} points)"
    table = Table(title=Text(assignment or "(no assignment)"), title_justify="left", expand=False,
                  caption=Text(caption), caption_justify="left")
    table.add_column("test, then its message", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("points", justify="right", no_wrap=True)
    for name, group in by_function([t for t in tests if t.status != "passed"]).items():
        first = group[0]
        cases = f" ({len(group)} cases)" if len(group) > 1 else ""
        cell = Text(clean(name) + cases)
        message = short_message(first)
        if message and message != REASONS[first.status]:
            cell.append("\n" + message, style="dim")
        table.add_row(cell, Text(first.status.replace("_", " "), style=STYLES[first.status]),
                      Text(f"{points(sum(t.points for t in group))}/{points(sum(t.max_points for t in group))}"))
    return table


def summary_lines(report: GradeReport) -> list[str]:
    """One line per assignment: `alpha  12 / 18 points; 5 more need a GPU, not graded here (not counted) (9/12
    tests passed)`, the parts named as in every view (autograder.report.parts)."""
    groups = report.by_assignment()
    width = max((len(name) for name in groups), default=0)
    lines = []
    for (name, tests), parts in zip(groups.items(), by_assignment(report.tests).values()):
        passed = sum(t.status == "passed" for t in tests)
        todo = sum(t.status == "not_implemented" for t in tests)
        lines.append(f"{name:<{width}}  {describe(parts)}  ({passed}/{len(tests)} tests passed"
                     + (f"; {todo} not implemented yet)" if todo else ")"))
    return lines


def print_report(report: GradeReport, console: Console | None = None) -> None:
    console = console or Console()
    if report.not_gradable:
        console.print(Text(clean(f"not gradable: {report.not_gradable}"), style="bold red"))
    for assignment, tests in report.by_assignment().items():
        console.print(assignment_table(assignment, tests))
    for line in summary_lines(report):
        console.print(Text(line))
    if report.tests:
        console.print(Text(f"total {describe(parts_of(report.tests))}", style="bold"))
    for line in report.log:
        console.print(Text(clean(line), style="dim"))


def gradebook_table(rows: list[dict], final: dict | None = None) -> Table:
    """The cohort at a glance: one row per submission from `Gradebook.rows()`, its status first, each score out
    of its maximum (autograder.report.parts), under it the points of that maximum awaiting hand grading and
    those needing a GPU (not counted); with `final` (autograder.report.gradebook.finals), then the final total
    after the late policy and the course file's overrides, out of its maximum. Statuses and numbers are never
    cut: on a narrow terminal, or in a pipe (80 columns), the names and notes wrap instead, and a score's
    parts go on lines of their own."""
    assignments = sorted({name for row in rows for name in row["assignments"]})
    graded = [row["status"] in SCORED for row in rows]  # a student of the roster with no submission scores 0
    parts = [_parts(row) for row in rows]
    scores = [[_score(mine.get(name) if ok else None) for name in assignments]
              + [_score(sum(mine.values(), NONE) if ok else None)] for mine, ok in zip(parts, graded)]
    table = Table(title="gradebook", title_justify="left")
    table.add_column("submission", overflow="fold")
    table.add_column("status", no_wrap=True)
    for name in assignments + ["total"]:  # a score wraps at its spaces, never inside a number
        table.add_column(name, justify="right", overflow="fold")
    if final is not None:
        table.add_column("final", justify="right", overflow="fold")
    table.add_column("note", overflow="fold")
    for row, cells in zip(rows, scores):
        status = Text(row["status"], style="green" if row["status"] in SCORED else "bold red")
        mine = final.get(row["name"]) if final is not None else None
        ends = [Text("-" if mine is None else " / ".join(map(points, final_total(mine))))] if final is not None else []
        note = "" if row["status"] == "graded" else _last_line(row["message"])  # a graded row's parts say it all
        table.add_row(Text(clean(row["name"])), status, *cells, *ends, Text(note))
    return table


def _last_line(message: str) -> str:
    """An error's last line: the exception itself, after any traceback."""
    return _fit([line for line in message.splitlines() if line.strip()][-1:])


def _parts(row: dict) -> dict[str, Parts]:
    """The row's parts per assignment (Gradebook.rows()); a row without them counts its maximum as graded."""
    if "parts" in row:
        return row["parts"]
    return {name: Parts(pair[0], pair[1], 0.0, 0.0) for name, pair in row["assignments"].items()}


def _score(parts) -> Text:
    """`12 / 21` (out of the maximum), then on lines of their own `(3 by hand)` for the points of it awaiting hand
    grading and `+5 GPU` for those needing a GPU (not counted), where there are any."""
    if parts is None:
        return Text("-")
    extra = ([f"({points(parts.by_hand)} by hand)"] if parts.by_hand else []) + (
        [f"+{points(parts.gpu)} GPU"] if parts.gpu else [])
    return Text("\n".join([fraction(parts), *extra]))
