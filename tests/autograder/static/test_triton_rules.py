"""Static rules of Triton tasks: host code allocates, reshapes and launches; the kernels compute.

The worker reports the kernels it launched and the torch ops it ran, but the student's code runs
there and can fool both (tests/autograder/cheats/flash_attention/). The points for "a Triton kernel
computed this" rest on the source, parsed by the grader (autograder/static/triton_rules.py): each cheat
breaks a rule, and the reference and the correct alternatives break none.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autograder.static.checks import blocked
from autograder.suites.flash_attention.rules import TRITON_RULES
from autograder.suites.gpu_kernels.rules import TRITON_RULES as KERNEL_RULES
from autograder.static.triton_rules import scan

ROOT = Path(__file__).resolve().parents[3]
SOLUTION = ROOT / "solutions" / "flash_attention"
CHEATS = Path(__file__).resolve().parents[1] / "cheats" / "flash_attention"
ALTERNATIVES = Path(__file__).resolve().parents[1] / "alternatives" / "flash_attention"
FORWARD = "flash_triton.flash_forward_triton"

# cheat: (file, a word of the first finding's message there)
EXPECTED = {
    "dispatch_bypass": ("flash_triton.py", "torch.utils._python_dispatch"),
    "numpy_copy": ("flash_triton.py", "numpy"),
    "aliases": ("flash_triton.py", "torch.einsum"),
    "getattr_names": ("flash_triton.py", "built at run time"),
    "helper_module": ("_math.py", "torch.matmul"),
    "tensor_methods": ("flash_triton.py", ".matmul"),
    "python_numbers": ("flash_triton.py", ".tolist"),
    "constexpr_tensor": ("flash_triton.py", "tl.constexpr"),
}


def tree_with(tmp_path: Path, modules: dict[str, str]) -> Path:
    """solutions' flash_attention package with `modules` (file name -> source) written over it."""
    package = tmp_path / "tree" / "flash_attention"
    shutil.copytree(SOLUTION, package, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in modules.items():
        (package / name).write_text(text)
    return package.parent


def folder(path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(path.glob("*.py"))}


def kernels_module() -> dict[str, str]:
    """The kernels_module alternative: its flash_triton.py, and the reference's (markers dropped) as _kernels.py."""
    reference = "".join(line for line in (SOLUTION / "flash_triton.py").read_text().splitlines(keepends=True)
                        if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    return {**folder(ALTERNATIVES / "kernels_module"), "_kernels.py": reference}


def findings(tree: Path) -> list:
    return scan(tree / "flash_attention", "flash_attention", TRITON_RULES)


# ---- What is allowed --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["solution", "stubs", "atomic_dq", "kernels_module"])
def test_the_reference_the_stubs_and_a_correct_alternative_break_no_rule(tmp_path, name):
    if name == "solution":
        package = SOLUTION
    elif name == "stubs":
        package = ROOT / "assignments" / "flash_attention"
    else:
        modules = kernels_module() if name == "kernels_module" else folder(ALTERNATIVES / name)
        package = tree_with(tmp_path, modules) / "flash_attention"
    assert scan(package, "flash_attention", TRITON_RULES) == []


HONEST = '''
from __future__ import annotations

import math
import os
import warnings
from typing import Optional

import kernels  # noqa: F401
import torch
import triton
import triton.language as tl
from kernels.device import interpreted

from flash_attention.reference import check_attention_inputs

BLOCK = 32
LOG2E = 1.4426950408889634


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK_M"] == 0})
@triton.jit
def _kernel(Q, O, n, scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, EVEN: tl.constexpr = False):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    scale = abs(scale) * math.log2(math.e)
    x = tl.load(Q + rows, mask=rows < n, other=0.0)
    tl.store(O + rows, tl.exp(x * scale).to(O.dtype.element_ty), mask=rows < n)


def _config(q: torch.Tensor, q_tile: Optional[int]) -> dict:
    tile = BLOCK if q_tile is None else int(q_tile)
    if tile < 16 or tile & (tile - 1):
        raise ValueError(f"bad tile {tile} for shape {tuple(q.shape)} on {q.device.type}")
    return {"BLOCK_M": tile, "HEAD_DIM": q.shape[-1]}


def flash_forward_triton(q, k, v, is_causal=False, q_tile=None, k_tile=None):
    check_attention_inputs(q, k, v, is_causal)
    meta = _config(q, q_tile)
    n_queries, head_dim = q.shape[-2], q.shape[-1]
    batch = math.prod(q.shape[:-2])
    q3 = q.reshape(batch, n_queries, head_dim).contiguous()
    o = torch.empty_like(q3)
    lse = q3.new_empty((batch, n_queries), dtype=torch.float32)
    grid = lambda META: (triton.cdiv(n_queries, META["BLOCK_M"]), batch)
    scale = 1.0 / math.sqrt(head_dim) * LOG2E
    _kernel[grid](q3, o, q3.numel(), scale, **meta)

    def other_grid(meta):
        return (triton.cdiv(n_queries, meta["BLOCK_M"]), batch)

    _kernel[other_grid](q3, o, n_queries, scale, HEAD_DIM=head_dim, BLOCK_M=max(16, triton.next_power_of_2(n_queries)))
    if q.dim() == 4:
        b, h, n, d = q.shape
        _kernel[(triton.cdiv(n, BLOCK), b * h)](q3, o, q.stride(0), scale, HEAD_DIM=d, BLOCK_M=BLOCK, num_warps=4)
    if os.environ.get("LOUD"):
        warnings.warn(f"d = {head_dim}")
    if q.dtype in (torch.float16, torch.bfloat16) and not interpreted():
        o = o.to(q.dtype)
    for i, x in enumerate((q, k, v)):
        if x.stride(-1) != 1 and i + 1 > 1:
            print(f"input {i} of shape {list(x.shape)} is not contiguous")
    return o.view(q.shape), lse.reshape(q.shape[:-1])


class FlashAttentionTriton(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx: torch.autograd.function.FunctionCtx, q, k, v, is_causal=False):
        o, lse = flash_forward_triton(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = bool(is_causal)
        ctx.mark_non_differentiable(lse)
        ctx.scale = 1 / math.sqrt(q.shape[-1])
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        if ctx.needs_input_grad[0] and ctx.scale > 0 and ctx.causal:
            do = do.contiguous()
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v), None
'''


def test_the_usual_host_idioms_break_no_rule(tmp_path):
    """Grid lambdas and functions, meta dicts, shape arithmetic, casts, f-strings, ctx attributes: allowed."""
    assert findings(tree_with(tmp_path, {"flash_triton.py": HONEST})) == []


def test_other_modules_count_only_for_the_code_the_triton_module_uses(tmp_path):
    """reference.py may import torch.nn.functional and use it in `attention`: flash_triton.py uses only its
    input check. A helper module's function that flash_triton.py calls is held to the rules."""
    reference = (SOLUTION / "reference.py").read_text().replace(
        "import torch\n", "import torch\nimport torch.nn.functional as F\n").replace(
        "return torch.softmax(scores, dim=-1) @ v", "return F.softmax(scores, dim=-1) @ v")
    assert "F.softmax" in reference
    assert findings(tree_with(tmp_path, {"reference.py": reference})) == []
    triton = (SOLUTION / "flash_triton.py").read_text().replace(
        "from flash_attention.reference import check_attention_inputs",
        "from flash_attention.reference import attention, check_attention_inputs")
    triton = triton.replace("    return o.reshape(q.shape), lse.reshape(q.shape[:-1])",
                            "    o = attention(q, k, v, is_causal)\n"
                            "    return o.reshape(q.shape), lse.reshape(q.shape[:-1])")
    found = findings(tree_with(tmp_path / "uses", {"reference.py": reference, "flash_triton.py": triton}))
    assert found and {v.file for v in found} == {"reference.py"}
    assert any("torch.nn.functional.softmax" in v.message for v in found), [v.message for v in found]


# ---- What is not --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_cheat_breaks_a_rule_that_fails_the_triton_tasks_only(tmp_path, name):
    """Each cheat is found; the finding names the file, the line and the rule, and fails flash_triton's tasks,
    not flash_pytorch's."""
    tree = tree_with(tmp_path, folder(CHEATS / name))
    found = findings(tree)
    file, word = EXPECTED[name]
    first = [v for v in found if v.file == file][0]
    assert word in first.message, first.message
    assert f"{file} line {first.line}: `" in first.message
    assert "host code of a Triton task may allocate, reshape and launch" in first.message
    assert blocked(found, FORWARD) == found
    assert blocked(found, "flash_pytorch.flash_forward_pytorch") == []


# name: (module-level code, the body of flash_forward_triton)
SNIPPETS = {
    "torch._C": ("", "torch._C._set_grad_enabled(False)"),
    "torch.overrides": ("", "torch.overrides.TorchFunctionMode"),
    "eval": ("", "o = eval('q @ k.transpose(-1, -2)')"),
    "exec": ("", "exec('o = q')"),
    "__import__": ("", "np = __import__('numpy')"),
    "globals": ("", "found = globals()"),
    "importlib": ("", "import importlib"),
    "operator": ("", "import operator"),
    "sum of tensors": ("", "o = sum([q, k])"),
    "float of a tensor": ("", "x = float(q[0, 0, 0])"),
    ".item": ("", "x = q.max().item()"),
    "negation": ("", "o = -q"),
    "comparison": ("", "mask = q > 0"),
    "in-place arithmetic": ("", "o = torch.empty_like(q)\n    o += q"),
    "matmul operator on anything": ("", "o = torch.empty_like(q) @ torch.empty_like(k)"),
    "dunder": ("", "o = q.__class__"),
    "lambda that escapes": ("def _apply(fn, a, b):\n    return fn(a, b)\n", "o = _apply(lambda a, b: a * b, q, k)"),
    "helper given a tensor by keyword": ("def _scale(x=None):\n    return x * 2\n", "o = _scale(x=q)"),
    "helper used as a value": ("def _scale(x=None):\n    return x * 2\n", "fn = _scale\n    o = fn(q)"),
    "kernel called directly": ("", "_copy(q, q)"),
    "torch through a package module": ("import flash_attention.reference as ref\n", "o = ref.torch.matmul(q, k)"),
    "torch in a kernel": ("@triton.jit\ndef _k(X):\n    torch.matmul(X, X)\n", "_k[(1,)](q)"),
    "interpreter internals in a kernel": ("@triton.jit\ndef _k(X):\n    tl.store(X, X.handle.data)\n", "_k[(1,)](q)"),
    "host function in a kernel": ("def _host(x):\n    return x\n\n\n@triton.jit\ndef _k(X):\n    _host(X)\n",
                                  "_k[(1,)](q)"),
}
# A word of the finding's message, where it is not the snippet's name.
WORDS = {"sum of tensors": "sum(", "float of a tensor": "float(", "negation": "-q", "comparison": "compares",
         "in-place arithmetic": "o += q", "matmul operator on anything": "(`@`)", "dunder": "__class__",
         "lambda that escapes": "a * b", "helper given a tensor by keyword": "x * 2",
         "helper used as a value": "x * 2", "kernel called directly": "directly",
         "torch through a package module": "torch.matmul", "torch in a kernel": "torch.matmul",
         "interpreter internals in a kernel": ".data", "host function in a kernel": "not a @triton.jit function"}
SNIPPET_MODULE = '''
import kernels  # noqa: F401
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(X, Y):
    tl.store(Y, tl.load(X))


MODULE


def flash_forward_triton(q, k, v, is_causal=False, q_tile=None, k_tile=None):
    _copy[(1,)](q, k)
    BODY
    return q, q
'''


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_each_rule_is_applied(tmp_path, name):
    """One forbidden construct at a time, in a module that is otherwise allowed."""
    module, body = SNIPPETS[name]
    clean = SNIPPET_MODULE.replace("MODULE", "").replace("BODY", "pass")
    assert findings(tree_with(tmp_path / "clean", {"flash_triton.py": clean})) == []
    found = findings(tree_with(tmp_path, {"flash_triton.py": SNIPPET_MODULE.replace("MODULE", module).replace(
        "BODY", body)}))
    assert found, f"{name}: not found"
    assert any(WORDS.get(name, name) in v.message for v in found), [v.message for v in found]


# ---- The cheats would fool the worker's own evidence; the grader is not fooled --------------------------

PROBE = '''
import json, sys
import kernels  # noqa: F401
import torch
from autograder.suites.flash_attention import scenarios

results = {}
for tree in sys.argv[1:]:
    for name in [m for m in sys.modules if m == "flash_attention" or m.startswith("flash_attention.")]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    q, k, v = torch.randn(3, 2, 24, 16).unbind(0)
    got = scenarios.triton_forward(q, k, v, True, 16, 16, "cpu")
    s = (q.double() @ k.double().mT / 4).masked_fill(torch.ones(24, 24, dtype=torch.bool).triu(1), float("-inf"))
    right = torch.allclose(got["o"].double(), torch.softmax(s, -1) @ v.double(), atol=1e-5)
    results[tree] = dict(right=right, launches=got["launches"], torch_ops=got["torch_ops"])
    sys.path.remove(tree)
print(json.dumps(results))
'''


def test_the_worker_side_evidence_alone_would_be_fooled(tmp_path):
    """Without the static rules, the dispatch bypass would pass: right answers, a Triton kernel launched, no
    computing torch op recorded. (So the rules, not the recorders, hold the points.) The numpy copy is
    right too, and the record (an allowlist: allocations, views, copies) shows the tensor it made from
    host data."""
    trees = {name: tree_with(tmp_path / name, folder(CHEATS / name)) for name in ("dispatch_bypass", "numpy_copy")}
    done = subprocess.run([sys.executable, "-c", PROBE, *map(str, trees.values())], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    bypass, copy = results[str(trees["dispatch_bypass"])], results[str(trees["numpy_copy"])]
    assert bypass == dict(right=True, launches=bypass["launches"], torch_ops=[]) and bypass["launches"]
    assert copy["right"] and copy["launches"] and copy["torch_ops"], copy


def test_the_grader_fails_every_triton_test_of_the_dispatch_bypass(tmp_path, warm_grade):
    """Graded for real, the bypass earns no Triton point; each failed test says which rule, file and line."""
    tree = tree_with(tmp_path, folder(CHEATS / "dispatch_bypass"))
    report = warm_grade(tree, assignment="flash_attention", select="triton and not gpu")
    triton_tests = [t for t in report.tests if "triton" in t.name and t.status != "not_graded"]
    assert triton_tests, f"no Triton test ran: {report.log}"
    assert [t.name for t in triton_tests if t.points] == []
    for test in triton_tests:
        assert test.status == "failed" and "torch.utils._python_dispatch" in test.message, (test.name, test.message)


def test_code_the_analysis_cannot_follow_holds_no_triton_point(tmp_path):
    """An expression too deep for the analysis is not waved through: it fails the Triton tasks, saying why."""
    text = (SOLUTION / "flash_triton.py").read_text()
    text += "\n\ndef _deep(q):\n    return q" + ".reshape(-1)" * 600 + "\n"
    found = findings(tree_with(tmp_path, {"flash_triton.py": text}))
    assert len(found) == 1 and "could not analyse" in found[0].message
    assert blocked(found, FORWARD) == found


def test_a_tensor_given_to_apply_reaches_the_forward(tmp_path):
    """FlashAttentionTriton.apply called with a tensor for is_causal: the forward's flag may be a tensor,
    and a tl.constexpr argument made from it is found."""
    text = (SOLUTION / "flash_triton.py").read_text()
    text += "\n\ndef _sneaky(q, k, v):\n    return FlashAttentionTriton.apply(q, k, v, q)\n"
    text = text.replace("return o.reshape(q.shape), lse.reshape(q.shape[:-1])",
                        "_sneaky(q, k, v)\n    return o.reshape(q.shape), lse.reshape(q.shape[:-1])")
    found = findings(tree_with(tmp_path, {"flash_triton.py": text}))
    assert any("tl.constexpr argument IS_CAUSAL" in v.message for v in found), [v.message for v in found]


def test_the_alternative_with_a_kernels_module_passes_the_triton_tests(tmp_path):
    """kernels_module, which the rules accept, is also right: every hidden Triton test that runs on a CPU passes."""
    from tests.autograder.suites.test_suites_flash_attention import not_passed, outcomes

    tree = tree_with(tmp_path, kernels_module())
    found = outcomes(tree, tmp_path, "autograder/suites/flash_attention/test_flash_triton.py")
    assert not_passed(found) == {} and len(found) >= 5


PATCHES = {
    "__init__.py": "from flash_attention import flash_triton, flash_pytorch\n\n"
                   "flash_triton.flash_forward_triton = flash_pytorch.flash_forward_pytorch\n",
    "flash_pytorch.py": "import sys\n\nsys.modules['flash_attention.flash_triton'].flash_forward_triton = None\n",
    "analysis.py": "import importlib\n\nimportlib.import_module('flash_attention.' + 'flash_triton')\n",
    "reference.py": "import gc\n\nTARGET = 'flash_triton'\n",
}


@pytest.mark.parametrize("file", sorted(PATCHES))
def test_no_module_of_the_package_may_patch_the_triton_module(tmp_path, file):
    """The worker imports every module of the package in one process: flash_pytorch.py (or __init__.py, or
    any other) replacing flash_triton's functions at import time would slip past rules that read
    flash_triton.py alone. Such patching fails the Triton tasks wherever it is."""
    text = (SOLUTION / file).read_text() + "\n" + PATCHES[file] if (SOLUTION / file).exists() else PATCHES[file]
    found = findings(tree_with(tmp_path, {file: text}))
    assert [v for v in found if v.file == file], [v.message for v in found]
    assert blocked(found, FORWARD) == found


def test_an_init_that_reexports_the_modules_breaks_no_rule(tmp_path):
    """`from . import flash_pytorch, flash_triton` in __init__.py runs flash_pytorch's top level only: its
    torch functions are not host code of the Triton task."""
    init = ("from . import analysis, flash_pytorch, flash_triton, reference\n"
            "from .flash_triton import FlashAttentionTriton\n")
    assert findings(tree_with(tmp_path, {"__init__.py": init})) == []


# ---- Stores into what the grader's process shares ---------------------------------------------------------
# The worker imports torch, Triton and the grader's modules beside the submission: an attribute assigned there
# (`triton.compile = fake`) would change what the grader builds and observes in that process.

FOREIGN_STORES = {
    "a module's function, at import": ("", "import triton\ntriton.compile = None\n"),
    "a nested module, at import": ("", "import torch\ntorch.cuda.is_available = lambda: True\n"),
    "deleted": ("", "import triton\ndel triton.compile\n"),
    "in a tuple target": ("", "import triton\n(triton.compile, _x) = (None, 1)\n"),
    "a for target": ("", "import triton\nfor triton.compile in [None]:\n    pass\n"),
    "triton.language's dot, in host code": ("    tl.dot = None\n", ""),
    "a tensor's operator": ("    torch.Tensor.__add__ = None\n", ""),
    "through a local alias": ("    cuda = torch.cuda\n    cuda.is_available = None\n", ""),
    "a dunder through an alias": ("    t = torch.Tensor\n    t.__add__ = None\n", ""),
    "an input's data": ("    x.data = x\n", ""),
    "a helper's argument": ("", "def _set(m):\n    m.is_available = None\n"),
    "an expression": ("    [torch.cuda][0].is_available = None\n", ""),
    "a class name bound again": ("    _Box.is_available = None\n",
                                 "class _Box:\n    pass\n\n\n_Box = torch.cuda\n"),
    "a parameter named as a class": ("", "class _Box:\n    pass\n\n\ndef _set(_Box):\n    _Box.is_available = None\n"),
    "an object of an own class, bound again by a loop": (
        "    box = _Box()\n    for box in [torch.cuda]:\n        pass\n    box.is_available = None\n",
        "class _Box:\n    pass\n"),
    "a method's self bound again": ("", "class _Box:\n    def set(self):\n        self = torch.cuda\n"
                                        "        self.is_available = None\n"),
}
OWN_STORES = {
    "an autograd Function's ctx": ("", "class _Fn(torch.autograd.Function):\n    @staticmethod\n"
                                       "    def forward(ctx, x):\n        ctx.note = 1\n        return x\n"),
    "an object of the package's own class": ("    box = _Box()\n    box.block = 16\n",
                                              "class _Box:\n    def __init__(self):\n        self.block = 0\n"),
}


def gpu_kernels_tree(tmp_path: Path, in_function: str, at_end: str) -> Path:
    """solutions' gpu_kernels with `in_function` at the start of softmax_triton's body, `at_end` appended."""
    tree = tmp_path / "gpu_kernels"
    shutil.copytree(ROOT / "solutions" / "gpu_kernels", tree, ignore=shutil.ignore_patterns("__pycache__"))
    path = tree / "softmax.py"
    text = path.read_text()
    start = text.index("def softmax_triton(")
    body = text.index('"""', text.index('"""', start) + 3) + 3
    path.write_text(text[:body] + "\n" + in_function + text[body:] + "\n\n" + at_end)
    return tree


def kernel_findings(tree: Path) -> list:
    return scan(tree, "gpu_kernels", KERNEL_RULES)


@pytest.mark.parametrize("name", list(FOREIGN_STORES))
def test_an_attribute_stored_into_what_the_grader_shares_is_refused(tmp_path, name):
    found = kernel_findings(gpu_kernels_tree(tmp_path, *FOREIGN_STORES[name]))
    assert found and all(v.file == "softmax.py" for v in found), [v.message for v in found]
    assert any("changes" in v.message and "softmax.py line" in v.message for v in found), [v.message for v in found]


@pytest.mark.parametrize("name", list(OWN_STORES))
def test_attributes_of_the_codes_own_objects_may_be_set(tmp_path, name):
    assert kernel_findings(gpu_kernels_tree(tmp_path, *OWN_STORES[name])) == []


# Rebinding a Triton task's function from another module however it is spelled, or doing the work where the
# worker's observers (launches, kernel stores, torch ops) cannot see it: each fails the Triton tasks.
REBINDS = {
    "object.__setattr__": "import flash_attention.flash_triton as _ft\n"
                          "object.__setattr__(_ft, 'flash_forward_triton', None)\n",
    "type.__setattr__": "import flash_attention.flash_triton as _ft\ntype.__setattr__(type(_ft), 'x', None)\n",
    "__dict__": "from flash_attention import flash_triton as _ft\n_ft.__dict__['flash_forward_triton'] = None\n",
    "getattr of a built name": "import flash_attention.flash_triton as _ft\n"
                               "getattr(object, '__set' + 'attr__')(_ft, 'flash_forward_' + 'triton', None)\n",
    "getattr of a dunder": "import flash_attention.flash_triton as _ft\n"
                           "getattr(object, '__setattr__')(_ft, 'flash_forward_triton', None)\n",
    "_disable_current_modes": "from torch.utils._python_dispatch import _disable_current_modes as _quiet\n",
    "torch._C": "import torch\n\nQUIET = torch._C._DisableTorchDispatch\n",
    "threading": "import threading\n",
    "concurrent.futures": "from concurrent.futures import ThreadPoolExecutor\n",
}


@pytest.mark.parametrize("name", sorted(REBINDS))
def test_no_module_may_rebind_a_task_or_hide_work_however_it_is_spelled(tmp_path, name):
    text = (SOLUTION / "analysis.py").read_text() + "\n" + REBINDS[name]
    found = findings(tree_with(tmp_path, {"analysis.py": text}))
    assert [v for v in found if v.file == "analysis.py"], [v.message for v in found]
    assert blocked(found, FORWARD) == found


def test_a_cost_module_that_rebinds_the_matmul_fails_the_matmul_task(tmp_path):
    """gpu_kernels: cost.py (no Triton task of its own) computes the product in torch outside the dispatch modes,
    copies it with a kernel of the package, and sets it over the stub's matmul_triton with object.__setattr__.
    Every finding names cost.py, and matmul's task fails for both (as every Triton task does: no module may
    change another)."""
    package = tmp_path / "gpu_kernels"
    shutil.copytree(ROOT / "assignments" / "gpu_kernels", package, ignore=shutil.ignore_patterns("__pycache__"))
    attack = textwrap.dedent("""
        import triton
        import triton.language as tl
        from torch.utils._python_dispatch import _disable_current_modes as _quiet
        import gpu_kernels.matmul as _mm


        @triton.jit
        def _copy_kernel(S, D, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            tl.store(D + offs, tl.load(S + offs, mask=offs < n), mask=offs < n)


        def _matmul(a, b, bias=None, activation=None):
            with _quiet():
                c = (a.double() @ b.double()).to(a.dtype).contiguous()
            out = torch.empty(c.shape, dtype=a.dtype, device=a.device)
            _copy_kernel[(triton.cdiv(c.numel(), 1024),)](c, out, c.numel(), BLOCK=1024)
            return out


        object.__setattr__(_mm, "matmul_triton", _matmul)
        """)
    (package / "cost.py").write_text((package / "cost.py").read_text() + attack)
    found = scan(package, "gpu_kernels", KERNEL_RULES)
    assert {v.file for v in found} == {"cost.py"}, [v.message for v in found]
    mine = blocked(found, "matmul.matmul_triton")
    assert any("__setattr__" in v.message for v in mine) and any("_python_dispatch" in v.message for v in mine)


def test_reading_a_functions_name_with_getattr_breaks_no_rule(tmp_path):
    """getattr of a constant, harmless dunder (a benchmark's label: `getattr(fn, "__name__", repr(fn))`) is fine
    in any module; a dunder that sets or reaches code is not (test above)."""
    text = (SOLUTION / "analysis.py").read_text() + '\n\ndef label(fn):\n    return getattr(fn, "__name__", repr(fn))\n'
    assert findings(tree_with(tmp_path, {"analysis.py": text})) == []
