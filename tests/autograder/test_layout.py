"""The grader's rooms and the direction of their imports (README "Layout").

A submission flows intake, stage, static checks, sandbox, results, reports, gradebook; the rooms of
autograder/ import only downwards in ROOMS (a room may import itself and any room listed after it), with
no exception: the words every room speaks (the results model, the wire format, the solution markers) live
on the ground floor, autograder/model/. No module of autograder/ or kernels/ imports another in a circle,
kernels/ never imports autograder/, and the code the sandboxed worker and the student's harness run never
imports the trusted side. The imports are read from the source (every `import` and `from ... import`, at
any depth: a function-level import counts), so an import added anywhere shows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autograder.package.layout import HARNESS
from autograder.sandbox.staging import FILES as WORKER_FILES

ROOT = Path(__file__).resolve().parents[2]
# Top to bottom: each room may import the rooms below it, never one above. "cli" holds the faces over the verbs
# (autograder/cli.py, __main__.py, bench.py); every other room is the folder of autograder/ of its name, and the
# package's own __init__ (a docstring) is on the ground floor with the model.
ROOMS = ("cli", "package", "cohort", "grading", "authoring", "written", "report", "suites", "static", "sandbox",
         "harness", "model")
FACES = ("autograder.cli", "autograder.__main__", "autograder.bench")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(top: str = "autograder") -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / top).rglob("*.py"))}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that this file imports, anywhere in it (`from a import b` counts a.b when
    b is a module, else a)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                      for a in node.names}
    return {name for name in found if name in known}


def graph(*tops: str) -> dict[str, set[str]]:
    """What each module of the given top-level packages imports of them (autograder/ alone by default)."""
    found = {name: path for top in tops or ("autograder",) for name, path in modules(top).items()}
    return {name: imports_of(path, set(found)) - {name} for name, path in found.items()}


def room(module: str) -> str:
    if module == "autograder":
        return "model"
    if module in FACES:
        return "cli"
    return module.split(".")[1]


def cycle(edges: dict[str, set[str]]) -> list[str]:
    """One import circle of the graph (its modules in order, the first repeated at the end), or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[node] = 2
        path.pop()
        return []

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return []


def closure(start: set[str], edges: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo += sorted(edges.get(node, ()))
    return seen


def test_every_module_lives_in_a_room_of_the_list():
    assert {room(m) for m in modules()} <= set(ROOMS)


@pytest.mark.parametrize("top", ["autograder", "kernels"])
def test_no_module_imports_another_in_a_circle(top):
    found = cycle(graph(top))
    assert not found, "an import circle: " + " -> ".join(found)


def test_kernels_never_import_the_grader():
    """kernels/ is given code: students, the solutions and the grader import it, never the other way round."""
    edges = graph("kernels", "autograder")
    upward = sorted(f"{source} imports {target}" for source, targets in edges.items() if source.startswith("kernels")
                    for target in targets if target.startswith("autograder"))
    assert not upward, "kernels/ imports the grader:\n" + "\n".join(upward)


def test_the_ground_floor_imports_nothing_above_it():
    """The model is what every room imports; it imports only itself (the check above, said for the room that
    must not move)."""
    edges = graph()
    above = sorted(f"{source} imports {target}" for source, targets in edges.items() if room(source) == "model"
                   for target in targets if room(target) != "model")
    assert not above, "\n".join(above)


def test_the_circle_finder_finds_a_planted_circle():
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycle(planted) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_imports_only_point_down_the_rooms():
    rank = {name: i for i, name in enumerate(ROOMS)}
    upward = sorted(f"{source} imports {target} ({room(source)} -> {room(target)})"
                    for source, targets in graph().items() for target in targets
                    if room(source) != room(target) and rank[room(target)] < rank[room(source)])
    assert not upward, "imports that run back up the rooms:\n" + "\n".join(upward)


@pytest.mark.parametrize("side, files", [("the sandboxed worker", WORKER_FILES),
                                         ("the student's harness", HARNESS)])
def test_the_worker_side_never_imports_the_trusted_side(side, files):
    """What runs beside student code imports only its own files and the ground floor (autograder/model/)."""
    edges = graph()
    own = {m for m, p in modules().items()
           if any(p.relative_to(ROOT).as_posix() == f or p.relative_to(ROOT).as_posix().startswith(f + "/")
                  for f in files)}
    assert own, f"{side}: none of {files} is a module of autograder/"
    reached = closure(own, edges)
    ground = {m for m in modules() if room(m) == "model"}
    assert reached <= own | ground, f"{side} imports {sorted(reached - own - ground)}"


def test_the_runner_is_on_the_trusted_side():
    """The test above can fail: the runner reaches the static checks and the reports, which the worker
    side must not."""
    reached = closure({"autograder.grading.runner"}, graph())
    assert {"autograder.static.checks", "autograder.grading.intake"} <= reached
