"""What a student's run prints: one screen, the failures as notes, then the next step.

In a student's run (an implementation tree other than the reference solutions, in this process) at
pytest's default verbosity and --tb:
- a test that fails only because a stub still raises NotImplementedError is not shown as a traceback;
  such tests are one line per task, grouped by handout section in handout order;
- any other failure is shown in pytest's short style: the test's line, the frames of the student's code
  (the harness hides its own with __tracebackhide__) and the error, then what the test checks, its
  Hint and where the student wrote the task;
- tensors compared in an assertion are summarised (shape, dtype, the worst element, how many differ);
- the run ends with the next step: the first task in handout order that does not pass yet, and the
  command that runs only its tests.
`-v`, an explicit `--tb=...` and the grader's runs keep pytest's own output. Statuses, points and the
exit status are the points plugin's; this module only chooses what is printed.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from autograder.harness import tasks
from autograder.harness.failures import compared_tensors, distinct, pattern
from kernels import course
from autograder.harness.plugin import report_of, tree_of, waiting_edges
from autograder.model.results import TestResult

_ON = pytest.StashKey[bool]()
_TENSORS = pytest.StashKey[dict]()  # test id -> the summary of the tensors its assert_close compared
_RAISED = pytest.StashKey[dict]()  # test id -> (path, line, function) of the student's frame that raised
NOT_PASSING = ("failed", "error", "not_implemented")


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    tree = tree_of(config)
    student = tree is not None and tree.name != "solutions"  # the reference's own runs keep pytest's output
    on = student and config.option.tbstyle == "auto" and config.option.verbose <= 0
    config.stash[_ON] = on
    config.stash[_TENSORS] = {}
    config.stash[_RAISED] = {}
    if on:
        config.option.tbstyle = "short"


STUB_MESSAGE = re.compile(r"(?:NotImplementedError: )?([\w.]+) in ([\w/]+?)\.py is not implemented yet")


def stub_name(test: TestResult) -> str:
    """`m.add` from a stub's message "add in demo/m.py is not implemented yet": a task name for a test without one."""
    found = STUB_MESSAGE.match(test.message) if test.status == "not_implemented" else None
    return f"{found.group(2).rpartition('/')[2]}.{found.group(1)}" if found else ""


class Group:
    """The tests of one task that do not pass, with where the handout and the tree place the task."""

    def __init__(self, tree: Path, root: Path, first: TestResult, index: int) -> None:
        self.assignment, self.task, self.tests = first.assignment, first.task, []
        self.name = first.task or stub_name(first) or first.name
        self.place = tasks.locate(tree, root, first.assignment, first.task) if first.task else None
        section = (self.place.section, self.place.title) if self.place and self.place.section else \
            tasks.section_of(first.message)
        self.section, self.title = section or (None, "")
        number = course.number(first.assignment) if first.assignment in course.packages() else None
        self.order = (number is None, number or 0, first.assignment, self.section is None, self.section or 0, index)

    @property
    def label(self) -> str:
        return (f"§{self.section} " if self.section is not None else "") + self.name

    def command(self) -> str:
        if not self.task:
            return f"python -m pytest {self.tests[0].name}"
        return f"make test T={self.task}" if "MAKELEVEL" in os.environ else f"python -m pytest --task {self.task}"


def groups(config: pytest.Config, statuses: tuple[str, ...], names: set[str] | None = None) -> list[Group]:
    """The tasks with a test of one of `statuses` (and, given `names`, one of those), in handout order (the
    assignment's number in the course, kernels/course.py, then the section)."""
    found: dict[tuple[str, str], Group] = {}
    for index, test in enumerate(report_of(config).tests):
        if test.status in statuses and (names is None or test.name in names):
            key = (test.assignment, test.task or stub_name(test) or test.name)
            if key not in found:
                found[key] = Group(tree_of(config), Path(config.rootpath), test, index)
            found[key].tests.append(test)
    return sorted(found.values(), key=lambda group: group.order)


def _count(n: float, what: str) -> str:
    return f"{n:g} {what}{'s' * (n != 1)}"


def not_implemented_lines(config: pytest.Config) -> list[str]:
    """The tasks still stubs, by assignment in course order: an assignment not started yet (no test of it ran
    code of the student's) in one line, the others a line per task in handout order."""
    started = {t.assignment for t in report_of(config).tests if t.status in ("passed", "failed", "error")}
    lines, assignment = [], None
    todo = groups(config, ("not_implemented",))
    for group in todo:
        if group.assignment == assignment:
            if assignment in started:
                points = sum(t.max_points for t in group.tests)
                lines.append(f"  {group.label}: not implemented yet ({_count(len(group.tests), 'test')}, "
                             f"{_count(points, 'point')})")
            continue
        assignment = group.assignment
        handout = tree_of(config) / assignment / "README.md"
        where = f"handout: {handout.relative_to(config.rootpath).as_posix()}" \
            if handout.is_file() and handout.is_relative_to(config.rootpath) else ""
        if assignment in started:
            lines.append(assignment + (f" ({where})" if where else ""))
            points = sum(t.max_points for t in group.tests)
            lines.append(f"  {group.label}: not implemented yet ({_count(len(group.tests), 'test')}, "
                         f"{_count(points, 'point')})")
            continue
        mine = [g for g in todo if g.assignment == assignment]
        sections = [g.section for g in mine if g.section is not None]
        span = "" if not sections else f", §{min(sections)}" if min(sections) == max(sections) else \
            f", §{min(sections)} to §{max(sections)}"
        tests = [t for g in mine for t in g.tests]
        lines.append(f"{assignment}: not started: {_count(len(mine), 'task')}{span} ({_count(len(tests), 'test')}, "
                     f"{_count(sum(t.max_points for t in tests), 'point')})" + (f"; {where}" if where else ""))
    return lines


def waiting_edge_lines(config: pytest.Config) -> list[str]:
    """A line per task whose edge tests passed in pytest but count nothing yet (autograder.harness.edges): how
    many, their points, and the ordinary test they wait for."""
    waiting = waiting_edges(config)
    lines, assignment = [], None
    for group in groups(config, ("failed",), set(waiting)):
        if group.assignment != assignment:
            assignment = group.assignment
            lines.append(assignment)
        count, points = len(group.tests), sum(t.max_points for t in group.tests)
        first = waiting[group.tests[0].name]
        until = (f"once {first.rpartition('::')[2]} passes" if first else
                 f"once the task's ordinary tests run and pass (none ran here: {group.command()})")
        verbs = ("passes", "counts") if count == 1 else ("pass", "count")
        lines.append(f"  {group.label}: {count} edge test{'s' * (count != 1)} {verbs[0]} in pytest and {verbs[1]} "
                     f"({points:g} point{'s' * (points != 1)}) only {until}")
    return lines


def note(config: pytest.Config, test: TestResult) -> str:
    """What follows a failure's traceback: what the test checks, its hint, the tensors, the student's code."""
    lines = [f"checks: {test.checks}"] if test.checks else []
    if test.hint:
        lines.append(f"Hint: {test.hint}")
    if test.name in config.stash[_TENSORS]:
        lines.append(config.stash[_TENSORS][test.name])
    where = your_code(config, test)
    if where:
        lines.append(f"your code: {where}")
    return "\n".join(lines)


def _place(config: pytest.Config, assignment: str, name: str, why: str = "", line: int | None = None) -> str:
    """`path:line name, why (handout §N Title)` of the function `name` (module.qualname), or ""."""
    place = tasks.locate(tree_of(config), Path(config.rootpath), assignment, name)
    if place is None:
        return ""
    section = f" (handout §{place.section} {place.title})" if place.section is not None else ""
    return f"{place.path}:{line or place.line} {name}{f', {why}' if why else ''}{section}"


def your_code(config: pytest.Config, test: TestResult) -> str:
    """The function a failure is in: where the student's code raised (its deepest frame); else a function of the
    task's module that the task calls and whose own tests fail in this run (training_days on a wrong
    training_flops); else the kernel the task launches, where a Triton task computes; else the task itself."""
    raised = config.stash[_RAISED].get(test.name)
    if raised is not None:
        path, line, qualname = raised
        return (_place(config, test.assignment, f"{Path(path).stem}.{qualname}", "where it raised", line)
                or f"{path}:{line} {qualname}, where it raised")
    if not test.task:
        return ""
    module, _, name = test.task.partition(".")
    called, launched = tasks.calls(tree_of(config), test.assignment, test.task)
    failing = {t.task for t in report_of(config).tests if t.status in ("failed", "error")
               and t.assignment == test.assignment}
    for callee in called:
        if f"{module}.{callee}" in failing and callee != name:
            return _place(config, test.assignment, f"{module}.{callee}",
                          f"which {name} calls: its own tests fail, fix it first")
    for kernel in launched:
        found = _place(config, test.assignment, f"{module}.{kernel}", f"the kernel {name} launches" +
                       _helpers(config, test.assignment, f"{module}.{kernel}"))
        if found:
            return found
    return _place(config, test.assignment, test.task, _helpers(config, test.assignment, test.task).lstrip(", "))


def _helpers(config: pytest.Config, assignment: str, function: str) -> str:
    """", which calls _forward_query_tile (line 46)": the functions of its module that `function` calls and that
    the student writes too (a stub's docstring names its handout section); "" when there are none."""
    module = function.partition(".")[0]
    called, _ = tasks.calls(tree_of(config), assignment, function)
    places = {name: tasks.locate(tree_of(config), Path(config.rootpath), assignment, f"{module}.{name}")
              for name in dict.fromkeys(called) if f"{module}.{name}" != function}
    written = [f"{name} (line {place.line})" for name, place in places.items() if place and place.section is not None]
    return f", which calls {', '.join(written)}" if written else ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    excinfo = call.excinfo
    on = item.config.stash.get(_ON, False) and excinfo is not None
    if on:
        compared = compared_tensors(excinfo, helpers=False)  # the tests' own helpers say as much already
        if compared is not None:
            item.config.stash[_TENSORS][item.nodeid] = summarise(*compared)
        elif excinfo.errisinstance(AssertionError) and "tensor(" in str(excinfo.value):
            excinfo.value.args = (elide_tensors(str(excinfo.value)),)
        raised = deepest_in(excinfo, tree_of(item.config), Path(item.config.rootpath))
        if raised is not None:
            item.config.stash[_RAISED][item.nodeid] = raised
    report = yield
    if on and report.failed and ends_in_libraries(excinfo, tree_of(item.config)):
        keep = lambda info: to_student_code(info, Path(item.config.rootpath), tree_of(item.config))  # noqa: E731
        report.longrepr = excinfo.getrepr(style="short", tbfilter=keep, funcargs=False, truncate_locals=True)
    return report


def _inside(entry, folder: Path) -> bool:
    return Path(str(entry.path)).is_relative_to(folder)


def deepest_in(excinfo: pytest.ExceptionInfo, tree: Path, root: Path) -> tuple[str, int, str] | None:
    """(path shown from the run's root, line, qualified name) of the deepest frame of the traceback in `tree`."""
    inside = [entry for entry in excinfo.traceback if _inside(entry, tree)]
    if not inside:
        return None
    entry = inside[-1]
    path = Path(str(entry.path))
    shown = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    code = entry.frame.code.raw
    return shown, entry.lineno + 1, getattr(code, "co_qualname", code.co_name)


def ends_in_libraries(excinfo: pytest.ExceptionInfo, tree: Path) -> bool:
    """Whether the error was raised in a library (torch, einops...) called from the student's code."""
    entries = list(excinfo.traceback)
    inside = [i for i, entry in enumerate(entries) if _inside(entry, tree)]
    return bool(inside) and inside[-1] + 1 < len(entries)


def to_student_code(excinfo: pytest.ExceptionInfo, root: Path, tree: Path):
    """The frames from the first of the project's own (tests, fixtures) to the student's last one."""
    entries = [entry for entry in excinfo.traceback if not entry.ishidden(excinfo)]
    first = next((i for i, entry in enumerate(entries) if _inside(entry, root)
                  and not _inside(entry, Path(sys.prefix))), 0)
    last = max(i for i, entry in enumerate(entries) if _inside(entry, tree))
    return type(excinfo.traceback)(entries[first: last + 1])


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config):
    if not config.stash.get(_ON, False):
        return (yield)
    results = {test.name: test for test in report_of(config).tests}
    waiting = {name for name, test in results.items() if test.status == "not_implemented"}
    stats = terminalreporter.stats
    shown = {key: stats[key] for key in ("failed", "error") if key in stats}
    for key, reports in shown.items():
        stats[key] = [r for r in reports if getattr(r, "nodeid", None) not in waiting]
        for report in stats[key]:
            test = results.get(report.nodeid)
            if test is not None and hasattr(report.longrepr, "addsection"):
                text = note(config, test)
                if text:
                    report.longrepr.addsection("what this test checks", text)
    lines = not_implemented_lines(config)
    if lines:
        terminalreporter.ensure_newline()
        terminalreporter.section("not implemented yet")
        for line in lines:
            terminalreporter.write_line(line)
    try:
        return (yield)
    finally:
        stats.update(shown)  # pytest's closing line still counts every failure


@pytest.hookimpl(specname="pytest_terminal_summary", tryfirst=True)
def pytest_terminal_summary_edges(terminalreporter, config: pytest.Config) -> None:
    """Just before the points table (the plugin's own summary, which runs after this one), in every student's
    run (-v included): the edge tests that pytest passed and the table does not count yet, and why."""
    tree = tree_of(config)
    lines = waiting_edge_lines(config) if tree is not None and tree.name != "solutions" else []
    if lines:
        terminalreporter.ensure_newline()
        terminalreporter.section("edge tests waiting for their task")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int):
    result = yield
    config = session.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    todo = groups(config, NOT_PASSING) if config.stash.get(_ON, False) and reporter is not None else []
    if todo:
        first = todo[0]
        reporter.write_line(f"next: {first.assignment} {first.label} does not pass yet; run only its tests with: "
                            f"{first.command()}", bold=True)
    return result


# Tensors in assertions: summarised, never printed whole.


def summarise(actual, expected, tolerance: tuple[float, float] | None = None) -> str:
    """One line about two tensors: shapes and dtypes, how many elements differ by more than `tolerance`
    ((rtol, atol); None for exact), the worst one."""
    import torch

    head = f"got shape {tuple(actual.shape)} {actual.dtype}, expected shape {tuple(expected.shape)} {expected.dtype}"
    if actual.shape != expected.shape:
        return head
    if actual.numel() == 0:
        return head + "; both empty"
    rtol, atol = tolerance or (0.0, 0.0)
    got, want = actual.detach().cpu().double(), expected.detach().cpu().double()
    excess = torch.nan_to_num((got - want).abs() - (atol + rtol * want.abs()), nan=float("inf"))
    off = (excess > 0) & ~(got.isnan() & want.isnan()) & ~(got == want)
    allowed = "exact" if tolerance is None else f"atol={atol:g} + rtol={rtol:g} * |expected|"
    if not bool(off.any()):
        return f"{head}; all {got.numel()} elements within tolerance ({allowed})"
    worst = int(torch.where(off, excess, -1.0).flatten().argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), want.shape))
    shown = distinct(got.flatten()[worst].item(), want.flatten()[worst].item())
    return (f"{head}; {int(off.sum())} of {got.numel()} elements differ (tolerance: {allowed}); worst at "
            f"index {index}: got {shown[0]}, expected {shown[1]}{pattern(got, want, tolerance or (0.0, 0.0))}")


def elide_tensors(text: str, keep: int = 40) -> str:
    """Each `tensor(...)` longer than `keep` characters in an assertion's text, cut to its dimensions and start."""
    out, start = [], 0
    while (begin := text.find("tensor(", start)) >= 0:
        depth, end = 0, begin + len("tensor")
        for end in range(begin + len("tensor"), len(text)):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
        body = text[begin + len("tensor("): end]
        if len(body) > keep and not body.startswith("<"):
            dims = len(body) - len(body.lstrip("["))
            first = " ".join(body[:keep].replace("\\n", " ").split())  # the explanation escapes newlines
            body = f"<{dims}-d, values {first} ...>"
        out.append(text[start:begin] + f"tensor({body})")
        start = end + 1
    return "".join(out) + text[start:]


def pytest_assertrepr_compare(config: pytest.Config, op: str, left, right) -> list[str] | None:
    torch = sys.modules.get("torch")
    if torch is None or op not in ("==", "!=") or not isinstance(left, torch.Tensor) \
            or not isinstance(right, torch.Tensor):
        return None
    return [f"tensor {op} tensor", summarise(left, right)]
