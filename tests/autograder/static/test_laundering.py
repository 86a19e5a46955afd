"""Triton host code laundered (issue 29, part 1): tensors handed between functions through a flow the
data-flow analysis does not follow, then computed on with in-place operators, behind a do-nothing kernel.

The static rules of Triton tasks (autograder/static/triton_rules.py over autograder/static/flow.py) must
either follow each flow (the name it binds is a tensor, and the arithmetic on it is found) or refuse the
construct with a message naming the line. The issue's attack is a cheat of its own
(tests/autograder/cheats/gpu_kernels/global_stash/), graded end to end; the variants below are one
construct each. The reference solutions, the stubs and the correct alternatives break no rule
(tests/autograder/static/test_triton_rules.py and tests/autograder/suites/ check them).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.static.checks import blocked
from autograder.static.triton_rules import scan
from autograder.suites.flash_attention.rules import TRITON_RULES as FLASH_RULES
from autograder.suites.gpu_kernels.rules import TRITON_RULES

ROOT = Path(__file__).resolve().parents[3]
SOLUTION = ROOT / "solutions" / "gpu_kernels"
CHEATS = Path(__file__).resolve().parents[1] / "cheats" / "gpu_kernels"
TASK = "matmul.matmul_triton"


def tree_with(tmp_path: Path, modules: dict[str, str], base: Path = SOLUTION) -> Path:
    """`base`'s package with `modules` (file name -> source) written over it; returns the package folder."""
    package = tmp_path / "tree" / base.name
    shutil.copytree(base, package, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in modules.items():
        (package / name).write_text(text)
    return package


def findings(package: Path) -> list:
    return scan(package, "gpu_kernels", TRITON_RULES)


# matmul.py of each variant: HELPERS hand a, b, c from matmul_triton (BODY) to _work, which computes on them
# with in-place operators only; a do-nothing kernel is launched.
TEMPLATE = '''
import math

import kernels  # noqa: F401
import torch
import triton
import triton.language as tl


@triton.jit
def _touch(C):
    pass


HELPERS


def matmul_triton(a, b, bias=None, activation=None):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    BODY
    _touch[(1,)](c)
    return c
'''
WORK = '''
def _work():
    a, b, c = _get()
    c.zero_()
    for k in range(a.shape[1]):
        t = b[k].expand(c.shape).clone()
        t *= a[:, k:k + 1]
        c += t
    c *= c > 0
'''

# variant: (helpers, body, a word of the finding that blocks it)
VARIANTS = {
    "global statement": ("_S = None\n\n\ndef _put(a, b, c):\n    global _S\n    _S = (a, b, c)\n\n\n"
                         "def _get():\n    return _S\n" + WORK, "_put(a, b, c)\n    _work()", "global _S"),
    "module-level list": ("_S = []\n\n\ndef _put(a, b, c):\n    _S.append((a, b, c))\n\n\n"
                          "def _get():\n    return _S[-1]\n" + WORK, "_put(a, b, c)\n    _work()",
                          "module-level name `_S`"),
    "module-level dict by subscript": ("_S = {}\n\n\ndef _put(a, b, c):\n    _S['x'] = (a, b, c)\n\n\n"
                                       "def _get():\n    return _S['x']\n" + WORK, "_put(a, b, c)\n    _work()",
                                       "module-level name `_S`"),
    "module-level list through a local alias": (
        "_S = []\n\n\ndef _put(a, b, c):\n    box = _S\n    box.append((a, b, c))\n\n\n"
        "def _get():\n    return _S[-1]\n" + WORK, "_put(a, b, c)\n    _work()", "made elsewhere"),
    "module-level list through an argument": (
        "_S = []\n\n\ndef _put(box, a, b, c):\n    box.append((a, b, c))\n\n\n"
        "def _get():\n    return _S[-1]\n" + WORK, "_put(_S, a, b, c)\n    _work()", "argument `box`"),
    "list.append called on the class": (
        "_S = []\n\n\ndef _put(a, b, c):\n    list.append(_S, (a, b, c))\n\n\n"
        "def _get():\n    return _S[-1]\n" + WORK, "_put(a, b, c)\n    _work()", "`list`"),
    "a mutator taken as a value": (
        "_S = []\n_PUT = _S.append\n\n\ndef _get():\n    return _S[-1]\n" + WORK, "_PUT((a, b, c))\n    _work()",
        "as a value"),
    "a mutator looked up by name": (
        "_S = []\n\n\ndef _get():\n    return _S[-1]\n" + WORK, "getattr(_S, 'append')((a, b, c))\n    _work()",
        "by name"),
    "closure with nonlocal": (
        "def _pair():\n    box = None\n\n    def put(a, b, c):\n        nonlocal box\n        box = (a, b, c)\n\n"
        "    def get():\n        return box\n\n    return put, get\n\n\n_put, _get = _pair()\n" + WORK,
        "_put(a, b, c)\n    _work()", "nonlocal box"),
    "closure container": (
        "def _pair():\n    box = []\n\n    def put(a, b, c):\n        box.append((a, b, c))\n\n"
        "    def get():\n        return box[-1]\n\n    return put, get\n\n\n_put, _get = _pair()\n" + WORK,
        "_put(a, b, c)\n    _work()", "enclosing function's name `box`"),
    "class attribute": ("class _Store:\n    kept = None\n\n\ndef _get():\n    return _Store.kept\n" + WORK,
                        "_Store.kept = (a, b, c)\n    _work()", "computes with a tensor's values"),
    "class attribute read by getattr": (
        "class _Store:\n    kept = None\n\n\ndef _get():\n    return getattr(_Store, 'kept')\n" + WORK,
        "_Store.kept = (a, b, c)\n    _work()", "computes with a tensor's values"),
    "instance attribute behind methods": (
        "class _Box:\n    def put(self, a, b, c):\n        self.kept = (a, b, c)\n\n    def fetch(self):\n"
        "        return self.kept\n\n\n_BOX = _Box()\n\n\ndef _get():\n    return _BOX.fetch()\n" + WORK,
        "_BOX.put(a, b, c)\n    _work()", "computes with a tensor's values"),
    "property": (
        "class _Box:\n    def put(self, a, b, c):\n        self._kept = (a, b, c)\n\n    @property\n"
        "    def kept(self):\n"
        "        return self._kept\n\n\n_BOX = _Box()\n\n\ndef _get():\n    return _BOX.kept\n" + WORK,
        "_BOX.put(a, b, c)\n    _work()", "computes with a tensor's values"),
    "container held by an instance attribute": (
        "class _Box:\n    def __init__(self):\n        self.items = []\n\n\n_BOX = _Box()\n\n\n"
        "def _get():\n    return _BOX.items[-1]\n" + WORK, "_BOX.items.append((a, b, c))\n    _work()",
        "computes with a tensor's values"),
    "shared default argument": (
        "_S = []\n\n\ndef _put(a, b, c, box=_S):\n    box.append((a, b, c))\n\n\n"
        "def _get(box=_S):\n    return box[-1]\n" + WORK, "_put(a, b, c)\n    _work()", "argument `box`"),
    "default argument that is a tensor": (
        "_T = torch.zeros(4)\n\n\ndef _scale(t=_T):\n    t *= 2\n", "_scale()", "computes with a tensor's values"),
    "generator": ("def _gen(a, b, c):\n    yield a, b, c\n",
                  "for x, y, z in _gen(a, b, c):\n        z += x[:, :1]", "computes with a tensor's values"),
    "user decorator": (
        "def _feeding(*tensors):\n    def decorate(fn):\n        def run():\n            return fn(*tensors)\n\n"
        "        return run\n\n    return decorate\n",
        "@_feeding(a, b, c)\n    def _work(x, y, z):\n        z += x[:, :1]\n\n    _work()",
        "computes with a tensor's values"),
    "augmented assignment into a module-level list": (
        "_S = [()]\n\n\ndef _put(a, b, c):\n    _S[0] += (a, b, c)\n\n\ndef _get():\n    return _S[0]\n" + WORK,
        "_put(a, b, c)\n    _work()", "_S[0] += (a, b, c)"),
    "match capture": ("", "x = y = z = None\n    match (a, b, c):\n        case (x, y, z):\n            pass\n"
                          "    z += x[:, :1]", "computes with a tensor's values"),
    "except as": (
        "class _Carry(Exception):\n    pass\n\n\ndef _throw(c):\n    raise _Carry(c)\n",
        "e = None\n    try:\n        _throw(c)\n    except _Carry as e:\n        e *= 2",
        "computes with a tensor's values"),
    "walrus": ("", "if (s := (a, b, c)) is not None:\n        x, y, z = s\n        z += x[:, :1]",
               "computes with a tensor's values"),
    "special method": (
        "class _Box:\n    def __getitem__(self, i):\n        return _STASH[i]\n\n\n_STASH = {}\n", "_Box()[0]",
        "defines `__getitem__`"),
    "method named like tensor metadata": (
        "class _Box:\n    def size(self):\n        return self.kept\n",
        "box = _Box()\n    box.kept = c\n    box.size()",
        "defines `size`"),
    "tensor stored in a metadata-named attribute": (
        "class _Box:\n    pass\n", "_Box.shape = c", "`.shape`"),
    "global of another package module, imported": (
        "from gpu_kernels._stash import KEPT\n\n\ndef _get():\n    return KEPT[-1]\n" + WORK,
        "KEPT.append((a, b, c))\n    _work()", "imported name `KEPT`"),
    "global of another package module, by its module": (
        "from gpu_kernels import _stash\n\n\ndef _get():\n    return _stash.KEPT[-1]\n" + WORK,
        "_stash.KEPT.append((a, b, c))\n    _work()", "`gpu_kernels._stash.KEPT`"),
}


def variant(name: str) -> dict[str, str]:
    helpers, body, _ = VARIANTS[name]
    return {"matmul.py": TEMPLATE.replace("HELPERS", helpers).replace("BODY", body), "_stash.py": "KEPT = []\n"}


def test_the_template_without_a_flow_breaks_no_rule(tmp_path):
    """The variants' module with the arithmetic left out: allowed (so each finding below is the variant's)."""
    clean = TEMPLATE.replace("HELPERS", "").replace("BODY", "pass")
    assert findings(tree_with(tmp_path, {"matmul.py": clean, "_stash.py": "KEPT = []\n"})) == []


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_flow_the_analysis_cannot_follow_is_followed_or_refused(tmp_path, name):
    """Each variant is found, with a message that names matmul.py, the line and what to do, and it blocks
    matmul_triton (every test of it)."""
    found = findings(tree_with(tmp_path, variant(name)))
    word = VARIANTS[name][2]
    assert any(word in v.message for v in found), [v.message for v in found]
    first = [v for v in found if word in v.message][0]
    assert first.file == "matmul.py" and f"matmul.py line {first.line}: `" in first.message
    assert blocked(found, TASK) == found and found


# What host code may still do: containers it makes itself, classes with __init__ and attributes of numbers,
# generators of numbers, caught exceptions it re-raises, match on a flag.
ALLOWED = '''
import kernels  # noqa: F401
import torch
import triton
import triton.language as tl

_TILES = {torch.float32: 32}
_SEEN = []


@triton.jit
def _copy(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)


class _Plan:
    def __init__(self):
        self.blocks = []


def _grid(n):
    return (triton.cdiv(n, 32),)


def _blocks(n):
    for start in range(0, n, 32):
        yield start


def _flat(*tensors):
    parts = []
    for t in tensors:
        parts.append(t.reshape(-1))
    out = {}
    out["first"] = parts[0]
    return parts, out


def matmul_triton(a, b, bias=None, activation=None):
    try:
        tile = _TILES[a.dtype]
    except KeyError as exc:
        raise TypeError(f"unsupported dtype {a.dtype}") from exc
    match activation:
        case None | "relu" | "gelu":
            pass
        case other:
            raise ValueError(f"bad activation {other!r}")
    _SEEN.append(a.shape[0])
    plan = _Plan()
    plan.blocks.append(tile)
    parts, named = _flat(a, b)
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    c[:, :0] = a[:, :0]
    starts = list(_blocks(a.numel()))
    _copy[_grid(a.numel())](parts[0], named["first"], a.numel(), BLOCK=tile, num_warps=len(starts) % 4 + 1)
    return c
'''


def test_host_code_may_keep_its_own_containers_classes_and_generators(tmp_path):
    """The conservative rules leave honest host code alone: numbers through module containers and
    attributes, tensors in containers the function made itself, exceptions re-raised, match on a flag."""
    assert findings(tree_with(tmp_path, {"matmul.py": ALLOWED})) == []


def test_the_same_flows_are_refused_in_flash_attention(tmp_path):
    """flash_attention's Triton tasks have the same rules: the global stash in flash_forward_triton is found."""
    solution = ROOT / "solutions" / "flash_attention"
    text = (solution / "flash_triton.py").read_text()
    text += "\n\n_S = None\n\n\ndef _put(q):\n    global _S\n    _S = q\n\n\ndef _get():\n    return _S\n"
    text = text.replace("    return o.reshape(q.shape), lse.reshape(q.shape[:-1])",
                        "    _put(o)\n    return o.reshape(q.shape), lse.reshape(q.shape[:-1])")
    found = scan(tree_with(tmp_path, {"flash_triton.py": text}, base=solution), "flash_attention", FLASH_RULES)
    assert any("global _S" in v.message for v in found), [v.message for v in found]
    assert blocked(found, "flash_triton.flash_forward_triton") == found


def test_the_global_stash_cheat_loses_every_matmul_test(tmp_path, warm_grade):
    """The issue's attack, graded for real: every matmul_triton test (public and hidden, float32 and half
    precision) earns 0, each failure naming the `global` line; the other kernels keep their points."""
    package = tree_with(tmp_path, {p.name: p.read_text() for p in (CHEATS / "global_stash").glob("*.py")})
    found = findings(package)
    assert found and all("global _STASH" in v.message for v in found), [v.message for v in found]
    report = warm_grade(package.parent, assignment="gpu_kernels", select="matmul and not build")
    tests = [t for t in report.tests if t.task == TASK and t.status != "not_graded"]  # GPU tests: not graded
    assert len(tests) >= 8, f"the matmul tests did not run: {report.log}"
    assert [t.name for t in tests if t.points] == []
    for test in tests:
        assert test.status == "failed" and "global _STASH" in test.message, (test.name, test.message)
