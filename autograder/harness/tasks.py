"""Tasks: the contract items the tests exercise (`@pytest.mark.task("flops.FlopCounter")`).

`--task NAME` (the student Makefile's `make test T=NAME`) runs only the tests of one task, or of every
task of a module with `--task flops`. `locate` finds where a task lives in an implementation tree and
which handout section asks for it, by reading the source (never importing it): the "Handout: §N Title"
line that every stub's docstring carries.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

SECTION = re.compile(r"[Hh]andout:?\s*§(\d+)\s*([^)\n]*)")


@dataclass(frozen=True)
class Place:
    """Where a task is written (path relative to the run's root, line of its def) and its handout section."""

    path: str
    line: int
    section: int | None
    title: str


def task_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker("task")
    return str(marker.args[0]) if marker and marker.args else ""


def matches(task: str, wanted: str) -> bool:
    """`flops.FlopCounter` matches itself; `flops` matches every task of that module."""
    return bool(task) and (task == wanted or task.startswith(wanted + "."))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("llmsys").addoption(
        "--task", default=None, metavar="NAME",
        help="run only the tests of one task (e.g. flops.FlopCounter) or of one module's tasks (e.g. flops)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = config.getoption("--task")
    if not wanted:
        return
    keep = [item for item in items if matches(task_of(item), wanted)]
    if not keep:
        known = sorted({task_of(item) for item in items} - {""})
        raise pytest.UsageError(f"no test exercises the task {wanted!r}; the tasks are: {', '.join(known)}")
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep


def section_of(text: str) -> tuple[int, str] | None:
    """(3, "Counting FLOPs") from a docstring or message that says "Handout: §3 Counting FLOPs"."""
    found = SECTION.search(text or "")
    return (int(found.group(1)), found.group(2).strip()) if found else None


def _definition(tree: Path, assignment: str, task: str) -> tuple[Path, ast.AST] | None:
    """The file and the AST node that define `task` (module.qualname) of `assignment` in `tree`, or None."""
    module, _, qualname = task.partition(".")
    path = tree / assignment / f"{module}.py"
    try:
        body = ast.parse(path.read_text(encoding="utf-8")).body
    except (OSError, SyntaxError, ValueError):
        return None
    node = None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return path, node


def calls(tree: Path, assignment: str, task: str) -> tuple[list[str], list[str]]:
    """The plain names `task` calls, `name(...)`, and the kernels it launches, `name[grid](...)`, in the order
    they appear in its source (a class: in all its methods); ([], []) when it is not there."""
    found = _definition(tree, assignment, task)
    if found is None:
        return [], []
    called, launched = [], []
    for node in ast.walk(found[1]):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.append((node.lineno, node.col_offset, node.func.id))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) \
                and isinstance(node.func.value, ast.Name):
            launched.append((node.lineno, node.col_offset, node.func.value.id))
    return [name for *_, name in sorted(called)], [name for *_, name in sorted(launched)]


def locate(tree: Path, root: Path, assignment: str, task: str) -> Place | None:
    """Where `task` (module.qualname) of `assignment` is defined in `tree`, or None when it is not there."""
    found = _definition(tree, assignment, task)
    if found is None:
        return None
    path, node = found
    docs = [ast.get_docstring(node) or ""]
    if isinstance(node, ast.ClassDef):
        methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        docs += [ast.get_docstring(n) or "" for n in methods]
    section = next((found for found in map(section_of, docs) if found), None)
    try:
        shown = path.relative_to(root).as_posix()
    except ValueError:
        shown = str(path)
    return Place(shown, node.lineno, *(section or (None, "")))
