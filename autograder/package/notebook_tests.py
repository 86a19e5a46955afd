"""The notebook's test cells: run one test file in this kernel, on the package the module cells saved.

    points = run_tests("tests/resource_accounting/test_memory.py")                  # a public test file
    points += run_tests("autograder/suites/resource_accounting/test_hidden_memory.py",
                        files=HIDDEN_TESTS)                                          # when graded

`run_tests` prints what failed (for hidden tests, only their points) and returns the points earned; a
test cell ends with that number, which nbgrader takes as the cell's partial credit. Nothing else reaches the cell's output: pytest's report and
anything student code prints are kept, because nbgrader gives a cell zero for any output on stderr.

This ships with the nbgrader course. Student code runs in this very process, so this is a convenience
for students and for nbgrader's own autograde, not the trusted grader (that one grades the notebook
in its sandbox). Tests that need a GPU or the reference solution are left out here, and the test
cells' points leave them out too (`counted`): they run only in the trusted grader.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import shutil
import sys
from pathlib import Path

import pytest


def counted(gpu: bool, reference: bool) -> bool:
    """Whether a test runs in the notebook: not when it needs a GPU or the reference solution."""
    return not gpu and not reference


class _Session:
    """A pytest plugin: leaves out the tests the notebook does not run, keeps the run's results."""

    def __init__(self) -> None:
        self.report = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        kept = [item for item in items if counted(item.get_closest_marker("gpu") is not None,
                                                  "reference" in getattr(item, "fixturenames", ()))]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from autograder.harness.plugin import report_of

        self.report = report_of(session.config)


def run_tests(path: str, files: dict[str, str] | None = None) -> float:
    """Run one test file on the package in this folder; print what failed; return the points earned."""
    import kernels  # noqa: F401  (Triton's mode, before the tests import anything of torch's)

    root = Path.cwd()
    session, output = _Session(), io.StringIO()
    leftovers = _write(root, files or {})
    try:
        _forget_student_code(root)
        # no:unraisableexception: that plugin collects garbage twice as each run ends, which in a kernel that
        # imported torch walks all of torch's objects, a third of a second per test cell (the grader runs without
        # it too)
        args = ["-q", "--tb=no", "-p", "no:cacheprovider", "-p", "no:faulthandler", "-p", "no:unraisableexception",
                f"--rootdir={root}", "--impl", str(root), path]
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            pytest.main(args, plugins=[session])
    finally:
        for leftover in leftovers:
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
    report = session.report
    if report is None or not report.tests:
        print(f"{path}: no test ran; pytest said:\n{output.getvalue()[-3000:]}")
        return 0.0
    _summary(path, report, hidden=files is not None)
    return round(report.score, 6)


def _write(root: Path, files: dict[str, str]) -> list[Path]:
    """Write files under root; return what to remove afterwards: the topmost new folders, or the files."""
    leftovers: list[Path] = []
    for rel, text in files.items():
        target = root / rel
        if not any(target.is_relative_to(p) for p in leftovers):
            missing = [p for p in reversed(target.parents) if p.is_relative_to(root) and not p.exists()]
            leftovers.append(missing[0] if missing else target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return leftovers


def _forget_student_code(root: Path) -> None:
    """Make the next import read the module cells' latest files, not what an earlier run imported."""
    from kernels import impl

    for package in impl.packages(root):
        if package in ("autograder", "kernels", "tests"):
            continue
        for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
            del sys.modules[name]
        shutil.rmtree(root / package / "__pycache__", ignore_errors=True)
    importlib.invalidate_caches()


def _summary(path: str, report, hidden: bool) -> None:
    """What failed and the points; for hidden tests the points only (nbgrader's feedback shows outputs)."""
    failing = [] if hidden else [t for t in report.tests if t.status in ("failed", "error", "not_implemented")]
    for test in failing:
        first = test.message.strip().splitlines()[0] if test.message.strip() else test.status
        print(f"  {test.status.upper().replace('_', ' ')}  {test.name.split('::', 1)[-1]}: {first[:300]}")
    passed = sum(t.status == "passed" for t in report.tests)
    label = "hidden tests" if hidden else path
    print(f"{label}: {report.score:g} / {report.max_score:g} points ({passed}/{len(report.tests)} tests passed)")
