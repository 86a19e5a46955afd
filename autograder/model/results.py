"""One results model for every report: per test a name, points, status, message and visibility.

The pytest plugin fills it (in a student's `make test` and in the grader alike); the terminal table,
Gradescope's results.json, JUnit XML, Markdown feedback and the SQLite gradebook are all views of it.

Messages, log lines and names may come from the submission (its exceptions, its file names), so the
model caps every string it holds, whenever it is set, and the log's length: every report is bounded
whatever the submission does.
"""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from dataclasses import dataclass, field

# passed: full points. failed: an assertion or an exception. not_implemented: the stub still raises
# NotImplementedError. error: the test could not run (setup failed, the worker died). not_graded: the
# test needs hardware this machine lacks (a GPU); never counted as passed. skipped: skipped for another
# stated reason (e.g. triton cannot be installed on this OS). manual: a written answer waiting to be
# graded by hand (0 points until then); hand_graded: its points were set by an instructor's grading
# sheet (autograder/written/manual.py), anywhere from 0 to max_points.
STATUSES = ("passed", "failed", "not_implemented", "error", "not_graded", "skipped", "manual", "hand_graded")
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
MAX_MESSAGE = 4000
MAX_FIELD = 500  # a test's name, task, checks or hint; the submission's name
MAX_LOG_LINE = 2000
MAX_LOG_LINES = 200
MAX_ANSWER = 20000  # characters of a written answer kept for the grading sheet
TRUNCATED = "\n... (truncated)"


def cap(text: str, limit: int) -> str:
    """`text` as text of at most `limit` characters, marked where cut."""
    text = text if isinstance(text, str) else str(text)
    return text if len(text) <= limit else text[: limit - len(TRUNCATED)] + TRUNCATED


def cap_log(lines: list[str]) -> list[str]:
    """At most MAX_LOG_LINES lines of at most MAX_LOG_LINE characters: the first ones and the last few."""
    lines = [cap(line, MAX_LOG_LINE) for line in lines[:MAX_LOG_LINES]] + (
        [cap(line, MAX_LOG_LINE) for line in lines[-10:]] if len(lines) > MAX_LOG_LINES else [])
    if len(lines) > MAX_LOG_LINES:
        lines[MAX_LOG_LINES - 11: MAX_LOG_LINES] = ["... (log lines left out)"]
    return lines


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class, despite the name

    name: str
    assignment: str
    max_points: float
    status: str
    points: float = 0.0
    message: str = ""
    visibility: str = "visible"
    task: str = ""
    checks: str = ""
    hint: str = ""
    answer: str = ""  # a written answer's text (results of status manual and hand_graded)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")
        if self.visibility not in VISIBILITIES:
            raise ValueError(f"visibility {self.visibility!r} is not one of {VISIBILITIES}")
        if self.status == "hand_graded":
            self.points = min(max(float(self.points), 0.0), self.max_points)
        else:
            self.points = self.max_points if self.status == "passed" else 0.0

    def __setattr__(self, name: str, value) -> None:
        if name == "message":
            value = cap(value, MAX_MESSAGE)
        elif name == "answer":
            value = cap(value, MAX_ANSWER)
        elif name in ("name", "task", "checks", "hint", "assignment"):
            value = cap(value, MAX_FIELD)
        super().__setattr__(name, value)


# How the message of a test begins when the grader's own sandbox could not start its worker
# (process.GraderFault): counted among `overloaded`, and said as the grader's fault, not the machine's load.
GRADER_FAULT = "the grader could not start its sandboxed worker"


@dataclass
class GradeReport:
    submission: str
    tests: list[TestResult] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    execution_time: float = 0.0
    seed: int | None = None  # of the randomised tests: the same submission gets the same inputs
    overloaded: list[str] = field(default_factory=list)  # tests the machine was too busy to finish
    # Set when nothing of the submission could be graded (autograder.grading.intake refused it): the
    # reason, which every report shows first; such a report has no tests and is never a score of 0.
    not_gradable: str = ""
    # Seconds of the grading's steps, as the runner timed them (autograder.grading.runner.TIMINGS says
    # which); empty in a report written before they were timed.
    timings: dict[str, float] = field(default_factory=dict)

    def __setattr__(self, name: str, value) -> None:
        if name == "submission":
            value = cap(value, MAX_FIELD)
        elif name == "not_gradable":
            value = cap(value, MAX_MESSAGE)
        elif name == "log":
            value = cap_log(list(value))
        super().__setattr__(name, value)

    @property
    def score(self) -> float:
        return sum(t.points for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_points for t in self.tests)

    def by_assignment(self) -> "OrderedDict[str, list[TestResult]]":
        groups: OrderedDict[str, list[TestResult]] = OrderedDict()
        for test in self.tests:
            groups.setdefault(test.assignment, []).append(test)
        return groups

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> "GradeReport":
        data = json.loads(text)
        tests = [TestResult(**{k: v for k, v in t.items() if k != "points" or t.get("status") == "hand_graded"})
                 for t in data.pop("tests")]
        return cls(tests=tests, **data)


def summary_lines(report: GradeReport, label: str = "points") -> list[str]:
    """One line per assignment: `resource_accounting   34 / 40 public points  (12/14 tests passed)`."""
    lines = []
    groups = report.by_assignment()
    width = max((len(name) for name in groups), default=0)
    for name, tests in groups.items():
        got = sum(t.points for t in tests)
        total = sum(t.max_points for t in tests)
        passed = sum(t.status == "passed" for t in tests)
        line = f"{name:<{width}}  {_num(got):>5} / {_num(total):<5} {label}  ({passed}/{len(tests)} tests passed)"
        waiting = [t for t in tests if t.status == "not_graded"]
        if waiting:
            line += f"; {_num(sum(t.max_points for t in waiting))} points need a GPU: not graded here"
        manual = [t for t in tests if t.status == "manual"]
        if manual:
            line += f"; {_num(sum(t.max_points for t in manual))} by hand still to grade"
        todo = sum(t.status == "not_implemented" for t in tests)
        if todo:
            line += f"; {todo} not implemented yet"
        lines.append(line)
    return lines


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"
