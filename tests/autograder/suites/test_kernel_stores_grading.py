"""Empty kernels whose results the host writes: the outside review's submission, and what it now earns.

gpu_kernels' three kernels launched and stored nothing of use; hidden code in cost.py (base64 handed to
exec, which the static rules did not read in a module without a Triton task) swapped each kernel's host
function for a wrapper that called the real one, then wrote the right answer into the result through its
numpy view: no aten op, one Triton kernel launched. cost.py's tests ran first in the same worker, and
every value and edge test of GeLU, softmax and matmul passed: 152 of 161 points, against 79.5 for the
same empty kernels without the trick.

Two layers now stop it, each shown alone:
- observed: under the interpreter the grader keeps every store of the package's kernels (kernels/stores.py)
  and a Triton task's result passes only where every element holds what a store of them wrote. With no
  static check at all (the public and hidden tests in a student's run), the wrapper fails every value test.
- read: exec, eval, compile, open, ctypes, `.numpy()` and the other ways to run unread code or reach a
  tensor's memory around torch are forbidden in every module of a package with a Triton task. Graded for
  real, the submission is found and scores no kernel point.
"""

from __future__ import annotations

import base64

import pytest

from autograder.static.triton_rules import scan as scan_triton
from autograder.suites.gpu_kernels.rules import TRITON_RULES
from tests.autograder.suites.test_suites_flash_attention import outcomes
from tests.autograder.suites.test_suites_gpu_kernels import PUBLIC, SOLUTION, TASKS, build_tree

# The host functions replaced by wrappers that write the answer, computed in numpy, through a numpy view.
WRAPPERS = '''
import numpy as _np
import gpu_kernels.elementwise as _E
import gpu_kernels.matmul as _M
import gpu_kernels.softmax as _S


def _gelu(v):
    return 0.5 * v * (1.0 + _np.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))


def _softmax(v):
    e = _np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _matmul(a, b, bias=None, activation=None):
    c = a @ b + (0.0 if bias is None else bias)
    return _gelu(c) if activation == "gelu" else _np.maximum(c, 0.0) if activation == "relu" else c


def _wrap(module, name, compute):
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        out = real(*args, **kwargs)
        if out.numel():
            host = [a.detach().numpy().astype(_np.float64) if hasattr(a, "numpy") else a for a in args]
            out.numpy()[...] = compute(*host[:len(args)] if name != "softmax_triton" else host[:1])
        return out

    setattr(module, name, wrapper)


_wrap(_E, "gelu_triton", _gelu)
_wrap(_S, "softmax_triton", _softmax)
_wrap(_M, "matmul_triton", _matmul)
'''


def empty_kernels() -> dict[str, str]:
    """The reference's three kernel modules with every stored value multiplied by 0: the kernels launch as
    before and store zeros."""
    stored = {"elementwise.py": ["gelu_tanh(x)"], "softmax.py": ["(e / tl.sum(e, 0))", "(tl.exp(x - m) / l)"],
              "matmul.py": ["acc"]}
    modules = {}
    for name, values in stored.items():
        text = (SOLUTION / name).read_text()
        for value in values:
            assert text.count(f", {value}.to(") == 1, f"{name}: the store of {value} is not where it was"
            text = text.replace(f", {value}.to(", f", (0.0 * {value}).to(")
        modules[name] = text
    return modules


def with_trick(hidden: bool) -> dict[str, str]:
    """empty_kernels, and cost.py with the wrappers: as plain code, or (hidden) base64 handed to exec."""
    trick = WRAPPERS if not hidden else (
        f"\nimport base64 as _b\nexec(_b.b64decode({base64.b64encode(WRAPPERS.encode()).decode()!r}))\n")
    return {**empty_kernels(), "cost.py": (SOLUTION / "cost.py").read_text() + trick}


VALUE_TESTS = ("test_gelu_matches_float64", "test_softmax_matches_float64", "test_matmul_matches_float64")


def test_observed_stores_alone_fail_the_host_written_answers(tmp_path):
    """In a student's run (no static check), the wrappers' answers are right, and every value test of the three
    kernels fails: the results' elements hold what no store of the package's kernels wrote."""
    found = outcomes(build_tree(tmp_path, with_trick(hidden=False)), tmp_path, *PUBLIC)
    values = {name: outcome for name, outcome in found.items() if name.rpartition("::")[2].startswith(VALUE_TESTS)}
    assert len(values) >= 6, found
    assert set(values.values()) == {"failed"}, values


def test_the_hidden_trick_is_read_by_the_static_rules():
    """exec of base64 in cost.py, a module without a Triton task, is found, and blocks the kernels' tasks."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        tree = build_tree(Path(folder), with_trick(hidden=True))
        found = scan_triton(tree / "gpu_kernels", "gpu_kernels", TRITON_RULES)
    messages = [v.message for v in found if v.file == "cost.py"]
    assert any("`exec" in m for m in messages), messages
    blocked = {module for v in found if v.file == "cost.py" for module in v.blocks}
    assert blocked >= {t.partition(".")[0] for t in TASKS}, blocked


@pytest.fixture(scope="module")
def graded(tmp_path_factory, warm_grade):
    """The review's submission, graded for real on the kernels' public and hidden tests."""
    select = "elementwise or softmax or matmul or kernels"
    return warm_grade(build_tree(tmp_path_factory.mktemp("trick"), with_trick(hidden=True)), assignment="gpu_kernels",
                 select=f"({select}) and not build")


def test_the_review_submission_scores_no_kernel_point(graded):
    """The static rules block every kernel task of the package (its empty kernels would earn only what needs
    no stored value; the trick takes even that): no kernel point, and no value test passes."""
    kernel = [t for t in graded.tests if t.task in TASKS]
    assert len(kernel) >= 40, graded.log
    assert sum(t.points for t in kernel) == 0, [(t.name, t.points) for t in kernel if t.points]
    assert not [t.name for t in kernel if t.status == "passed" and "matches_float64" in t.name]
