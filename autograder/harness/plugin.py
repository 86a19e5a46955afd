"""The pytest plugin: `--impl`, the `student` and `reference` fixtures, points, and the points table.

Markers a test may carry:
  points(n)            what the test is worth; every test of an assignment folder must have points
  visibility(v)        visible (default), hidden, after_due_date or after_published (Gradescope's names)
  task(name)           the contract item it exercises, e.g. "flops.FlopCounter" (static checks use it)
  gpu                  needs a CUDA device; elsewhere it is reported "not graded here: needs a GPU"
  triton               needs the triton package; skipped with the reason where it cannot be installed
  edge                 an edge case, a rejection, a single property, or how the task works (calls,
                       launches, build, speed): its points count only when the ordinary (value) tests
                       of its task pass (autograder.harness.edges)
"""

from __future__ import annotations

import dataclasses
import importlib
import random
from pathlib import Path

import pytest

from autograder.harness import edges, failures, hints, hooks
from kernels import impl
from autograder.harness.student import GraderOverloaded, LocalStudent, Student, unwrap_stub
from autograder.model.results import GradeReport, TestResult, summary_lines

# Selection by task (--task) and what a student's run prints: see those modules.
pytest_plugins = ("autograder.harness.tasks", "autograder.harness.terminal")

NOT_GRADED = "not graded here: needs a GPU"
_STUDENT = pytest.StashKey[Student]()
_TREE = pytest.StashKey[Path]()
_REPORT = pytest.StashKey[GradeReport]()
_STATE = pytest.StashKey[dict]()
_SEED = pytest.StashKey[int]()
_EDGES = pytest.StashKey[set]()
_WAITING = pytest.StashKey[dict]()
# Under pytest-xdist the tests run in worker processes: each result also rides on its teardown report under
# this attribute (pytest serialises a report's attributes), so that the controller's points table has them all.
_HANDOFF = "llmsys_result"

MARKERS = (
    "points(n): points the test is worth",
    "visibility(v): visible, hidden, after_due_date or after_published",
    "task(name): the contract item the test exercises, e.g. flops.FlopCounter",
    "gpu: needs a CUDA device; reported as not graded on a machine without one",
    "triton: needs the triton package (Linux only)",
    "edge: an edge case, a rejection or how a task works; its points count only when its task's value tests pass",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("llmsys", "LLM-systems homework")
    group.addoption(
        "--impl",
        default=None,
        help=f"implementation tree to test: solutions, assignments or PATH (env {impl.ENV_VAR})",
    )
    group.addoption("--seed", type=int, default=None,
                    help="seed for the randomised (hidden) tests; random when not given")
    parser.addini("llmsys_impl", "default implementation tree", default="assignments")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hooks)


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    seed = config.getoption("--seed")
    config.stash[_SEED] = seed if seed is not None else random.SystemRandom().randrange(2**31)
    config.stash[_REPORT] = GradeReport(submission="", log=[f"seed {config.stash[_SEED]} (rerun with --seed)"],
                                        seed=config.stash[_SEED])
    if not hasattr(config, "workerinput"):  # not a pytest-xdist worker: collect what workers hand off
        config.pluginmanager.register(_Handoff(config), "llmsys-handoff")
    remote = config.hook.pytest_llmsys_student(config=config)
    if remote is not None:
        config.stash[_STUDENT] = remote
        return
    choice = impl.choose(config.getoption("--impl"), config.getini("llmsys_impl"))
    try:
        tree = impl.resolve(choice, Path(config.rootpath))
        impl.activate(tree)
    except impl.ImplError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_TREE] = tree
    config.stash[_STUDENT] = LocalStudent()
    config.stash[_REPORT].submission = str(tree)


def pytest_report_header(config: pytest.Config) -> str:
    tree = config.stash.get(_TREE, None)
    where = f"implementation tree: {tree}" if tree else "student code runs in the grader's worker"
    return f"{where}; seed {config.stash[_SEED]}"


@pytest.fixture(scope="session")
def student(request: pytest.FixtureRequest) -> Student:
    """The student code under test (in this process, or in the grader's sandboxed worker)."""
    return request.config.stash[_STUDENT]


@pytest.fixture(scope="session")
def seed(request: pytest.FixtureRequest) -> int:
    """This run's seed: randomised tests derive their inputs from it (fixed with --seed)."""
    return request.config.stash[_SEED]


class Reference:
    """The reference solution, importable only where it is trusted and present."""

    def module(self, name: str):
        return importlib.import_module(name)


@pytest.fixture(scope="session")
def reference(request: pytest.FixtureRequest) -> Reference:
    """The reference solutions: in the grader's process, or in-process when testing solutions/."""
    tree = request.config.stash.get(_TREE, None)
    if tree is not None and tree.name != "solutions":
        pytest.skip("needs the reference solution: grade through `python -m autograder grade`")
    return Reference()


def assignment_of(item: pytest.Item) -> str:
    """The folder under tests/ (or autograder/suites/) that holds the test: its assignment's name."""
    parts = Path(item.path).resolve().parts
    for anchor in ("suites", "tests"):
        if anchor in parts:
            index = len(parts) - 1 - parts[::-1].index(anchor)
            if index + 2 < len(parts):
                return parts[index + 1]
    return ""


def points_of(item: pytest.Item) -> float | None:
    marker = item.get_closest_marker("points")
    if marker is None:
        return None
    value = marker.args[0] if marker.args else marker.kwargs.get("n")
    if not isinstance(value, (int, float)) or value < 0:
        raise pytest.UsageError(f"{item.nodeid}: points(...) needs a non-negative number, got {value!r}")
    return float(value)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    graded = {assignment_of(i) for i in items if points_of(i) is not None}
    missing = [i.nodeid for i in items if assignment_of(i) in graded and points_of(i) is None]
    if missing:
        raise pytest.UsageError("every test of an assignment needs @pytest.mark.points(n); missing on:\n  "
                                + "\n  ".join(missing))
    untasked = [i.nodeid for i in items if i.get_closest_marker("edge") and not i.get_closest_marker("task")]
    if untasked:
        raise pytest.UsageError("an edge test needs @pytest.mark.task(name), the task whose ordinary tests "
                                "it counts with; missing on:\n  " + "\n  ".join(untasked))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is not None:
        from kernels.device import has_cuda

        if not has_cuda():
            pytest.skip(NOT_GRADED)
    if item.get_closest_marker("triton") is not None:
        from kernels.device import triton_skip_reason

        reason = triton_skip_reason()
        if reason:
            pytest.skip(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    state = item.stash.setdefault(_STATE, {"status": None, "message": ""})
    if report.skipped and state["status"] is None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        state.update(status="not_graded" if reason == NOT_GRADED else "skipped", message=reason)
    elif report.failed and state["status"] in (None, "passed"):
        stub = unwrap_stub(call.excinfo.value) if call.excinfo is not None else None
        # A stub's own error (autograder.authoring.stubs words it so; nbgrader's stub cells give none), not any
        # NotImplementedError: torch raises one for a meta tensor's data, and a student's code may raise one for
        # a case it leaves out.
        not_impl = isinstance(stub, NotImplementedError) and (not str(stub) or "is not implemented yet" in str(stub))
        status = "not_implemented" if not_impl else ("failed" if report.when == "call" else "error")
        message = call.excinfo.exconly() if call.excinfo is not None else report.longreprtext
        if call.excinfo is not None and call.excinfo.errisinstance(GraderOverloaded):
            status = "error"  # the machine's, not the student's: the submission is graded again
            item.config.stash[_REPORT].overloaded.append(item.nodeid)
        kind = failures.kind(call.excinfo, item.config.stash.get(_TREE, None))
        state.update(status=status, message=message, kind=kind)
    elif report.passed and report.when == "call" and state["status"] is None:
        state["status"] = "passed"
    if report.when == "teardown":
        result = _record(item, state)
        if result is not None and hasattr(item.config, "workerinput"):
            setattr(report, _HANDOFF, {"result": dataclasses.asdict(result),
                                       "edge": item.get_closest_marker("edge") is not None})
    return report


class _Handoff:
    """The controller of a pytest-xdist run: records the results its workers hand off on their reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        handed = getattr(report, _HANDOFF, None)
        if not isinstance(handed, dict):
            return
        self.config.stash[_REPORT].tests.append(TestResult(**handed["result"]))
        if handed["edge"]:
            self.config.stash.setdefault(_EDGES, set()).add(handed["result"]["name"])


def _record(item: pytest.Item, state: dict) -> TestResult | None:
    points = points_of(item)
    if points is None:
        return None
    if item.get_closest_marker("edge") is not None:
        item.config.stash.setdefault(_EDGES, set()).add(item.nodeid)
    visibility = item.get_closest_marker("visibility")
    task = item.get_closest_marker("task")
    checks, written = hints.parse(getattr(item, "obj", None).__doc__ if hasattr(item, "obj") else "")
    status = state["status"] or "error"
    hint = hints.shown(written, state.get("kind", ""), state["message"]) if status in ("failed", "error") else ""
    result = TestResult(
        name=item.nodeid,
        assignment=assignment_of(item),
        max_points=points,
        status=status,
        message=state["message"],
        visibility=visibility.args[0] if visibility else "visible",
        task=task.args[0] if task else "",
        checks=checks,
        hint=hint,
    )
    item.config.stash[_REPORT].tests.append(result)
    return result


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    config.stash[_WAITING] = edges.settle(config.stash[_REPORT], config.stash.get(_EDGES, set()))


def waiting_edges(config: pytest.Config) -> dict[str, str]:
    """The edge tests that passed in pytest but count nothing yet, each with the ordinary test it waits for
    (autograder.harness.edges.settle); empty before the session's end."""
    return config.stash.get(_WAITING, {})


def report_of(config: pytest.Config) -> GradeReport:
    """The results recorded so far in this pytest run."""
    return config.stash[_REPORT]


def tree_of(config: pytest.Config) -> Path | None:
    """The implementation tree this process imports, or None when the grader's worker runs student code."""
    return config.stash.get(_TREE, None)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    report = config.stash[_REPORT]
    if not report.tests:
        return
    public = all(t.visibility == "visible" for t in report.tests)
    terminalreporter.section("points")
    for line in summary_lines(report, "public points" if public else "points"):
        terminalreporter.write_line(line)
