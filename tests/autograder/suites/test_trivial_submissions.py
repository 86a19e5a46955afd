"""Trivial submissions earn nothing: every stub answered by one constant strategy, graded by the real grader.

A strategy replaces every `raise NotImplementedError(...)` of the student stubs (assignments/) with one
statement: return 0, 0.0, inf, None, True, False or the function's first argument, or raise ValueError
(or TypeError); or with made-up values behind the right motions (call each function argument as often
as asked, then return a constant). Such a submission is graded by the real grader (sandboxed worker, hidden suites, static
checks) with a fixed seed: no public or hidden test may give it a point. `make test` grades three
strategies, `make test-trivial` every one. Edge cases, rejections and single properties
count only together with the same task's ordinary behaviour (the `edge` marker), so refusing
everything, or one constant that happens to be an edge case's answer, scores nothing.
"""

from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[3]
STUBS = ROOT / "assignments"
ASSIGNMENTS = ("resource_accounting", "flash_attention", "gpu_kernels")
SEED = 20261204

STRATEGIES = {
    "zero": "return 0",
    "zero_float": "return 0.0",
    "infinity": "return float('inf')",
    "none": "return None",
    "true": "return True",
    "false": "return False",
    "input": "return {first}",
    "refuse": "raise ValueError('no')",
    "refuse_type": "raise TypeError('no')",
    "refuse_as_asked": "raise {error}('no')",  # TypeError where the handout asks for one, else ValueError
    # Made-up values behind the right motions: call every callable argument as often as the integer
    # arguments add up to (a benchmark's warmup + rep), with the extra positional arguments, then return a
    # constant. Tests of how a function works count only with its value tests (the `edge` marker).
    "made_up": "_times = sum(v for v in [{params}] if type(v) is int and 0 < v < 1000)\n"
               "for _fn in [{params}]:\n"
               "    if callable(_fn) and not isinstance(_fn, type):\n"
               "        for _ in range(_times or 1):\n"
               "            _fn(*{varargs})\n"
               "return 1.0",
}
TYPE_ERRORS = {"float_format"}
# `make test` grades one constant, the echo and the refusal; `make test-trivial` (LLMSYS_TRIVIAL=all) every one.
QUICK = ("zero", "input", "refuse_as_asked")


def graded_strategies() -> list[str]:
    """QUICK; every strategy with LLMSYS_TRIVIAL=all; or the strategies named, comma-separated."""
    chosen = os.environ.get("LLMSYS_TRIVIAL", "")
    if chosen == "all":
        return list(STRATEGIES)
    return [s for s in chosen.split(",") if s in STRATEGIES] or list(QUICK)


def _is_stub_raise(node: ast.AST) -> bool:
    return (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
            and isinstance(node.exc.func, ast.Name) and node.exc.func.id == "NotImplementedError")


class _Answer(ast.NodeTransformer):
    """Every stub's `raise NotImplementedError(...)` becomes the strategy's statement."""

    def __init__(self, statement: str) -> None:
        self.statement = statement

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        self.generic_visit(node)
        names = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls", "ctx")]
        every = names + [a.arg for a in node.args.kwonlyargs]
        error = "TypeError" if node.name in TYPE_ERRORS else "ValueError"
        text = self.statement.format(first=names[0] if names else "None", error=error, params=", ".join(every),
                                     varargs=node.args.vararg.arg if node.args.vararg else "()")
        node.body = [new for s in node.body for new in (ast.parse(text).body if _is_stub_raise(s) else [s])]
        return node


def trivial_submission(tmp_path: Path, strategy: str) -> Path:
    """A copy of the stubs of every assignment, every stub answered by `strategy`."""
    tree = tmp_path / strategy
    for name in ASSIGNMENTS:
        shutil.copytree(STUBS / name, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.md"))
        for path in (tree / name).glob("*.py"):
            module = ast.parse(path.read_text())
            answered = _Answer(STRATEGIES[strategy]).visit(module)
            path.write_text(ast.unparse(ast.fix_missing_locations(answered)))
    return tree


def test_the_generator_answers_every_stub(tmp_path):
    """Each generated file parses and no stub is left: the strategy answers every function."""
    for strategy in STRATEGIES:
        tree = trivial_submission(tmp_path, strategy)
        for path in tree.rglob("*.py"):
            text = path.read_text()
            assert "NotImplementedError" not in text, f"{strategy}: {path.name} still has a stub"
            ast.parse(text)


def test_no_trivial_strategy_earns_a_point(tmp_path, warm_grade):
    """Graded by the real grader, each trivial strategy scores 0 in every assignment."""
    earned = {}
    for strategy in graded_strategies():
        report = warm_grade(trivial_submission(tmp_path, strategy), seed=SEED)
        assert report.tests, f"{strategy}: the grader produced no results: {report.log}"
        earned[strategy] = sorted(f"{t.name} ({t.points:g})" for t in report.tests if t.points)
    assert earned == {strategy: [] for strategy in graded_strategies()}


def test_a_required_call_that_is_only_named_earns_nothing(tmp_path, warm_grade):
    """attention_scores that names einops.einsum without calling it (and computes with torch.einsum) loses
    every attention_scores point, graded by the real grader; its ValueError test included."""
    tree = tmp_path / "named"
    shutil.copytree(ROOT / "solutions" / "resource_accounting", tree / "resource_accounting",
                    ignore=shutil.ignore_patterns("__pycache__", "*.md"))
    path = tree / "resource_accounting" / "einops_ops.py"
    call = 'return einsum(q, k, "... seq1 hidden, ... seq2 hidden -> ... seq1 seq2")'
    text = path.read_text()
    assert text.count(call) == 1, "the solution's attention_scores changed: update this test"
    path.write_text(text.replace(call, "einsum  # named, never called\n    return torch.einsum('...id,...jd->...ij', q, k)"))
    report = warm_grade(tree, assignment="resource_accounting", select="attention_scores", seed=SEED)
    scores = [t for t in report.tests if t.task == "einops_ops.attention_scores"]
    assert len(scores) >= 4, f"too few attention_scores tests ran: {[t.name for t in report.tests]}"
    assert [(t.name, t.points) for t in scores if t.points] == []
    assert all("einops.einsum` is required" in t.message or "counts only when" in t.message for t in scores)
