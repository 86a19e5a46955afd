"""Static checks: forbidden and required names found in the source, never by importing it.

Each test writes a small package into tmp_path and scans it with the assignments' real rules (or a
rule made for the test), so the messages checked are the ones students read.
"""

import ast
from pathlib import Path

import pytest

from autograder.static.checks import GRADER_RULE, Rule, blocked, scan
from autograder.suites.flash_attention.rules import RULES as FLASH_RULES
from autograder.suites.gpu_kernels.rules import RULES as KERNELS_RULES
from autograder.suites.resource_accounting.rules import RULES as ACCOUNTING_RULES

ROOT = Path(__file__).resolve().parents[3]
RULES = {"resource_accounting": ACCOUNTING_RULES, "flash_attention": FLASH_RULES, "gpu_kernels": KERNELS_RULES}


def package(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    root = tmp_path / name
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def flops(tmp_path: Path, text: str, **more: str) -> list:
    return scan(package(tmp_path, "resource_accounting", {"flops.py": text, **more}), "resource_accounting",
                ACCOUNTING_RULES)


def flash(tmp_path: Path, files: dict[str, str]) -> list:
    return scan(package(tmp_path, "flash_attention", files), "flash_attention", FLASH_RULES)


@pytest.mark.parametrize("assignment", sorted(RULES))
def test_the_reference_solutions_pass_every_rule(assignment):
    assert scan(ROOT / "solutions" / assignment, assignment, RULES[assignment]) == []


@pytest.mark.parametrize("assignment", sorted(RULES))
def test_the_rules_name_modules_and_tasks_of_the_contract(assignment):
    tree = ROOT / "solutions" / assignment
    for rule in RULES[assignment]:
        assert (rule.forbidden or rule.required) and rule.reason
        for entry in (e for e in rule.modules if e != "*"):
            module, _, task = entry.partition(".")
            defs = {n.name for n in ast.parse((tree / f"{module}.py").read_text()).body if hasattr(n, "name")}
            assert not task or task in defs, f"{rule.name}: {entry} is not in solutions/{assignment}"


def test_a_forbidden_call_is_reported_with_file_line_and_expression(tmp_path):
    found = flops(tmp_path, "import torch\n\n\ndef count():\n    return torch.utils.flop_counter.FlopCounterMode()\n")
    assert [(v.file, v.line, v.expression, v.blocks) for v in found] == [
        ("flops.py", 5, "torch.utils.flop_counter.FlopCounterMode", ("flops",))]
    assert found[0].message == ("flops.py line 5: `torch.utils.flop_counter.FlopCounterMode` is forbidden in "
                                "flops.py (FlopCounter must count FLOPs itself; see the handout, Forbidden APIs)")


@pytest.mark.parametrize("line", ["import torch.utils.flop_counter", "import torch.utils.flop_counter as fc",
                                  "from torch.utils import flop_counter",
                                  "from torch.utils.flop_counter import FlopCounterMode as Counter"])
def test_importing_a_forbidden_module_is_reported(tmp_path, line):
    found = flops(tmp_path, f"import math\n{line}\n")
    assert [(v.line, v.expression) for v in found] == [(2, line)]


def test_a_star_import_of_a_forbidden_module_is_reported(tmp_path):
    found = flops(tmp_path, "from torch.utils.flop_counter import *\nFlopCounterMode\n")
    assert [(v.line, v.expression) for v in found] == [(1, "from torch.utils.flop_counter import *"),
                                                      (2, "FlopCounterMode")]


def test_a_star_import_that_brings_in_a_forbidden_function_is_reported(tmp_path):
    found = flash(tmp_path, {"reference.py": "def attention(q, k, v):\n    return q\n",
                             "flash_pytorch.py": "from flash_attention.reference import *\n"})
    assert [(v.file, v.line, v.blocks) for v in found] == [("flash_pytorch.py", 1, ("flash_pytorch",))]
    assert "imports `flash_attention.reference.attention`" in found[0].message


def test_an_import_alias_is_followed(tmp_path):
    found = flash(tmp_path, {"flash_pytorch.py": "import torch.nn.functional as F\n\ndef f(q, k, v):\n"
                                                 "    return F.scaled_dot_product_attention(q, k, v)\n"})
    assert [(v.line, v.expression) for v in found] == [(4, "F.scaled_dot_product_attention")]
    assert "(names `torch.nn.functional.scaled_dot_product_attention`)" in found[0].message


def test_an_assigned_alias_is_followed(tmp_path):
    found = flash(tmp_path, {"flash_pytorch.py": "import flash_attention\nref = flash_attention.reference\n"
                                                 "G = ref\nG.attention(1, 2, 3)\n"})
    assert [(v.line, v.expression) for v in found] == [(4, "G.attention")]


@pytest.mark.parametrize("line", ['getattr(F, "scaled_dot_product_attention")(q, k, v)',
                                  'importlib.import_module("flash_attn")',
                                  '__import__("flash_attn.flash_attn_interface")',
                                  'eval("F.scaled_dot_product_attention(q, k, v)")'])
def test_a_string_that_names_a_forbidden_name_is_reported(tmp_path, line):
    found = flash(tmp_path, {"flash_pytorch.py": f"import importlib\nimport torch.nn.functional as F\n"
                                                 f"def f(q, k, v):\n    return {line}\n"})
    assert [v.line for v in found if v.rule != "no patching"] == [4]  # importlib: no module may use it


def test_prose_does_not_count(tmp_path):
    found = flash(tmp_path, {"flash_pytorch.py": '"""Unlike scaled_dot_product_attention, this uses the online '
                             'softmax."""\n\ndef f(x):\n    """No flash_attn, no torch.softmax."""\n'
                             '    raise ValueError("the softmax of a row needs all of it")\n'})
    assert found == []


def test_a_helper_module_does_not_hide_a_forbidden_call(tmp_path):
    found = flops(tmp_path, "from .counting import count\n",
                  **{"counting.py": "from .deep.util import make\n\ndef count():\n    return make()\n",
                     "deep/__init__.py": "",
                     "deep/util.py": "from torch.utils.flop_counter import FlopCounterMode\n\ndef make():\n"
                                     "    return FlopCounterMode()\n"})
    assert [(v.file, v.line, v.blocks) for v in found] == [("deep/util.py", 1, ("flops",)),
                                                          ("deep/util.py", 4, ("flops",))]
    assert "is forbidden in flops.py, which uses deep/util.py" in found[0].message


def test_what_a_module_only_imports_one_function_from_is_judged_by_that_function(tmp_path):
    reference = ("import torch\n\ndef check(q):\n    return _shape(q)\n\ndef _shape(q):\n    return q.shape\n\n"
                 "def attention(q, k, v):\n    return torch.softmax(q @ k.T, -1) @ v\n")
    clean = flash(tmp_path / "a", {"reference.py": reference, "flash_pytorch.py": "from .reference import check\n"})
    reached = flash(tmp_path / "b", {"reference.py": reference.replace("return q.shape", "return q.softmax(-1)"),
                                     "flash_pytorch.py": "from .reference import check\n"})
    assert clean == []
    assert [(v.file, v.line, v.expression, v.blocks) for v in reached] == [
        ("reference.py", 7, "q.softmax", ("flash_pytorch",))]


def test_the_reference_attention_is_forbidden_however_it_is_imported(tmp_path):
    files = {"reference.py": "def attention(q, k, v):\n    return q\n", "flash_triton.py":
             "from .reference import attention as naive\nfrom . import reference\n\ndef f(q):\n"
             "    return naive(q, q, q) + reference.attention(q, q, q)\n"}
    found = flash(tmp_path, files)
    assert [(v.line, v.blocks) for v in found if v.rule == "reference attention"] == [(1, ("flash_triton",)),
                                                                                     (5, ("flash_triton",))]


def test_importing_the_grader_is_a_violation_for_every_task(tmp_path):
    memory = ("import tests.resource_accounting.scenarios\nfrom autograder.model import wire\nimport importlib\n"
              "importlib.import_module('solutions.flops')\n")
    found = [v for v in flops(tmp_path, "X = 1\n", **{"memory.py": memory}) if v.rule == "grader code"]
    assert [(v.file, v.line, v.blocks) for v in found] == [("memory.py", 1, ("*",)), ("memory.py", 2, ("*",)),
                                                          ("memory.py", 4, ("*",))]
    assert blocked(found, "flops.matmul_flops") == blocked(found, "") == found
    assert "forbidden in any module (a submission may not import the grader" in found[0].message


def test_a_submission_module_or_word_called_tests_is_not_the_grader(tmp_path):
    found = flops(tmp_path, "from . import tests\n\nclass Run:\n    def __init__(self):\n"
                            "        self.tests = 'tests'\n", **{"tests.py": ""})
    assert found == []


def test_a_required_name_that_is_never_used_fails_the_task_that_needs_it(tmp_path):
    files = {"einops_ops.py": "import torch\nfrom einops import einsum, rearrange\n\ndef attention_scores(q, k):\n"
                              "    return torch.einsum('bid,bjd->bij', q, k)\n\ndef split_heads(x, h):\n"
                              "    return rearrange(x, '... s (h d) -> ... h s d', h=h)\n"}
    found = scan(package(tmp_path, "resource_accounting", files), "resource_accounting", ACCOUNTING_RULES)
    assert [(v.file, v.line, v.blocks) for v in found] == [("einops_ops.py", 0, ("einops_ops.attention_scores",))]
    assert found[0].message.startswith("einops_ops.py: `einops.einsum` is required in einops_ops.attention_scores "
                                       "but never called")
    assert blocked(found, "einops_ops.attention_scores") == found and blocked(found, "einops_ops.split_heads") == []


@pytest.mark.parametrize("body", ["einops.einsum\n    return torch.einsum('bid,bjd->bij', q, k)",
                                  "return (einops.einsum, torch.einsum('bid,bjd->bij', q, k))[1]",
                                  "f = einops.einsum\n    return torch.einsum('bid,bjd->bij', q, k)"],
                         ids=["bare name", "in a tuple", "assigned"])
def test_a_required_name_that_is_only_named_is_not_used(tmp_path, body):
    """The required call must be a call (or a decorator): a bare name that never runs does not count."""
    text = f"import einops\nimport torch\n\ndef attention_scores(q, k):\n    {body}\n"
    found = scan(package(tmp_path, "resource_accounting", {"einops_ops.py": text}), "resource_accounting",
                 ACCOUNTING_RULES)
    assert [(v.rule, v.blocks) for v in found] == [("einops scores", ("einops_ops.attention_scores",))]


@pytest.mark.parametrize("body", ["return einops.einsum(q, k, 'b i d, b j d -> b i j')",
                                  "f = einops.einsum\n    return f(q, k, 'b i d, b j d -> b i j')",
                                  "return helper(q, k)"], ids=["direct", "through an alias", "in a helper"])
def test_a_required_call_counts_however_it_is_reached(tmp_path, body):
    text = (f"import einops\n\ndef helper(q, k):\n    return einops.einsum(q, k, 'b i d, b j d -> b i j')\n\n"
            f"def attention_scores(q, k):\n    {body}\n")
    found = scan(package(tmp_path, "resource_accounting", {"einops_ops.py": text}), "resource_accounting",
                 ACCOUNTING_RULES)
    assert [v for v in found if v.rule == "einops scores"] == []


def test_a_stub_is_left_to_fail_as_not_implemented(tmp_path):
    stubs = ROOT / "assignments" / "resource_accounting"
    assert scan(stubs, "resource_accounting", ACCOUNTING_RULES) == []


def test_a_required_name_used_in_a_helper_module_counts(tmp_path):
    files = {"flash_triton.py": "from .kernels import add\n",
             "kernels.py": "import triton\n\n@triton.jit\ndef add(x):\n    pass\n"}
    assert flash(tmp_path, files) == []


def test_a_file_that_does_not_parse_blocks_the_modules_that_reach_it(tmp_path):
    found = flops(tmp_path, "def matmul_flops(m, n, p):\n    return 2 * m * n * p\n\nif True\n    pass\n",
                  **{"memory.py": "x = 1\n"})
    assert [(v.rule, v.file, v.line, v.blocks) for v in found] == [("syntax", "flops.py", 4, ("flops",))]
    assert found[0].message.startswith("flops.py line 4: does not parse")
    assert blocked(found, "flops.matmul_flops") == found and blocked(found, "memory.x") == []


def test_blocked_maps_a_task_to_its_module(tmp_path):
    found = flops(tmp_path, "from torch.utils.flop_counter import FlopCounterMode\n")
    assert blocked(found, "flops.FlopCounter") == found
    assert blocked(found, "memory.get_memory_usage") == blocked(found, "") == []


def test_the_source_is_never_run_and_deep_nesting_does_not_hide_a_call(tmp_path):
    deep = "x = " + " + ".join(["1"] * 2500) + " + FlopCounterMode\n"
    found = flops(tmp_path, "import os\nos._exit(3)\n" + deep)
    assert [v.line for v in found] == [3]


def test_a_rule_may_cover_every_module(tmp_path):
    rule = Rule("no pickle", ("*",), forbidden=("pickle",), reason="pickle is not plain data")
    found = scan(package(tmp_path, "pkg", {"a.py": "import pickle\n"}), "pkg", [rule])
    assert [(v.rule, v.blocks) for v in found] == [("no pickle", ("*",))]
    assert GRADER_RULE.imports_only and "tests" in GRADER_RULE.forbidden


@pytest.mark.parametrize("body", [
    "    import threading\n    out = []\n    t = threading.Thread(target=lambda: out.append(model(x)))\n"
    "    t.start()\n    t.join()\n    return out[0]\n",
    "    from concurrent.futures import ThreadPoolExecutor\n"
    "    return ThreadPoolExecutor(1).submit(model, x).result()\n",
    "    from torch.utils._python_dispatch import _disable_current_modes\n"
    "    with _disable_current_modes():\n        return model(x)\n",
])
def test_checkpointing_out_of_the_measurements_sight_fails_every_task(tmp_path, body):
    """A checkpointed_forward that runs the plain forward in another thread, or with the dispatch modes left,
    would hide from kernels.memory what it holds (and an autocast_forward so run, its matmuls' dtypes): the
    static check fails every task of the package, as the grader rule does."""
    text = ("import torch\n\n\ndef saved_activation_bytes(fn, *args):\n    return 0\n\n\n"
            "def checkpointed_forward(model, x, num_segments):\n" + body)
    found = scan(package(tmp_path, "resource_accounting", {"training.py": text}), "resource_accounting",
                 ACCOUNTING_RULES)
    assert {v.rule for v in found} == {"measured in sight"}
    assert blocked(found, "training.checkpointed_forward") == blocked(found, "training.autocast_forward") == found


def test_flash_pytorch_out_of_the_measurements_sight_is_reported(tmp_path):
    text = ("import threading\n\n\ndef flash_forward_pytorch(q, k, v, is_causal=False, q_tile=32, k_tile=32):\n"
            "    box = []\n    threading.Thread(target=lambda: box.append(q)).start()\n    return box\n")
    found = flash(tmp_path, {"flash_pytorch.py": text})
    assert {v.rule for v in found} == {"measured in sight"} and blocked(found, "flash_pytorch.flash_forward_pytorch")


# Patching what observes the submission, in the worker where its code runs: every spelling fails every task.
PATCHES = {
    "the memory tracker": "import kernels.memory as m\nm._StorageAccounting.held_bytes = lambda self: 0\n",
    "a torch method": "import torch\ntorch.Tensor.untyped_storage = lambda self: None\n",
    "a torch method through an alias": "import torch\nT = torch.Tensor\nT.untyped_storage = lambda self: None\n",
    "a deleted torch function": "import torch.utils.checkpoint\ndel torch.utils.checkpoint.checkpoint\n",
    "an imported class": "from torch.utils.checkpoint import checkpoint as c\nc.__wrapped__ = None\n",
    "setattr": "import torch\nsetattr(torch.Tensor, 'untyped_storage', None)\n",
    "object.__setattr__": "import torch\nobject.__setattr__(torch, 'autocast', None)\n",
    "sys.modules": "import sys\nsys.modules['kernels.memory'].MemoryTracker = None\n",
    "gc": "import gc\nFOUND = gc.get_objects()\n",
    "exec of a built string": "exec('import kernels.mem' + 'ory as m\\nm.MemoryTracker.held_bytes = 0')\n",
    "pkgutil": "import pkgutil\nCOUNTER = pkgutil.resolve_name('torch.utils.flop' + '_counter')\n",
    "operator.attrgetter": "import operator\nimport torch\nC = operator.attrgetter('utils.flop' + '_counter')(torch)\n",
    "a module's __dict__": "import kernels.memory as m\nm.__dict__['MemoryTracker'] = None\n",
}


@pytest.mark.parametrize("name", sorted(PATCHES))
def test_patching_what_observes_the_submission_fails_every_task(tmp_path, name):
    """The tests observe a submission through torch and the course library (kernels.memory, dispatch modes) in the
    process where its code runs: a module that changes them, however it spells it, fails every task."""
    found = scan(package(tmp_path, "resource_accounting", {"memory.py": PATCHES[name]}), "resource_accounting",
                 ACCOUNTING_RULES)
    assert found and {v.rule for v in found} == {"no patching"}, [v.message for v in found]
    assert blocked(found, "training.checkpointed_forward") == blocked(found, "flops.mfu") == found
    assert "no module may" in found[0].message


HARMLESS = {
    "the code's own objects": "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
                              "    def __init__(self):\n        super().__init__()\n"
                              "        self.layers = nn.ModuleList([nn.Linear(2, 2)])\n\n\n"
                              "def f(model, x):\n    torch.manual_seed(0)\n    x.requires_grad = True\n"
                              "    model.layers[0].weight.grad = None\n    return model(x)\n",
    "gc.collect": "import gc\n\n\ndef f(fn):\n    gc.collect()\n    return fn()\n",
    "a local called vars": "def f(model):\n    vars = [p for p in model.parameters()]\n    return len(vars)\n",
    "a local called inspect": "import torch\n\n\ndef f(value, dtype):\n"
                              "    inspect = torch.tensor(value).to(dtype)\n    return inspect.item() == 0\n",
    "checkpoint imported as gc": "from torch.utils.checkpoint import checkpoint as gc\n\n\n"
                                 "def f(run, h):\n    return gc(run, h, use_reentrant=False)\n",
    "a local called copy": "def f(a):\n    copy = a.detach().clone()\n    copy.requires_grad = True\n"
                           "    return copy\n",
    "re.compile": "import re\n\nPATTERN = re.compile('x')\n",
    "a local's attribute beside a star import": "from math import *\n\n\ndef f(model):\n    h = model.layer\n"
                                                "    h.flag = True\n    return h\n",
}


@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_harmless_code_that_looks_like_patching_breaks_no_rule(tmp_path, name):
    assert scan(package(tmp_path, "resource_accounting", {"training.py": HARMLESS[name]}), "resource_accounting",
                ACCOUNTING_RULES) == []
