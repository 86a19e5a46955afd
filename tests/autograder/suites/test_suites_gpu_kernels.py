"""The hidden gpu_kernels suite, tested: the reference and correct alternatives earn every point, the stubs
none, each plausible mistake loses the points of the property it breaks, and cheats gain nothing.

An implementation tree is built in tmp_path: solutions/gpu_kernels copied, then either an alternative's
modules on top (tests/autograder/alternatives/gpu_kernels/<name>/), one small edit of a solution module,
or a cheat (the reference with a few lines added, CHEATS below). The public tests and the hidden suite
run against it in a subprocess (`pytest ... --impl TREE`), with a fixed seed so that each run draws the
same cases; GPU tests and the build checks are deselected here (they have tests of their own in
test_gpu_compile_grading_gpu_kernels.py), the program-order check of test_gpu_compile.py runs. The
cheats are judged as the grader judges them: by the static rules, and once end to end.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import torch

from autograder.static.checks import blocked
from autograder.static.checks import scan as scan_rules
from autograder.suites.gpu_kernels.rules import RULES, TRITON_RULES
from autograder.static.triton_rules import scan as scan_triton
from tests.autograder.suites.test_suites_flash_attention import not_passed, outcomes

ROOT = Path(__file__).resolve().parents[3]
SOLUTION = ROOT / "solutions" / "gpu_kernels"
STUBS = ROOT / "assignments" / "gpu_kernels"
ALTERNATIVES = Path(__file__).resolve().parents[1] / "alternatives" / "gpu_kernels"
SUITE = "autograder/suites/gpu_kernels"
HIDDEN = "test_hidden_kernels.py"
CONTRACT = "test_hidden_kernels_contract.py"
DESIGN = "test_hidden_kernels_design.py"
ORDER = "test_gpu_compile.py::test_kernels_give_the_same_output_in_any_program_order"  # the builds aside
KERNEL_TESTS = [f"{SUITE}/{HIDDEN}", f"{SUITE}/{CONTRACT}", f"{SUITE}/{DESIGN}", f"{SUITE}/{ORDER}"]
PUBLIC = ["tests/gpu_kernels/test_elementwise.py", "tests/gpu_kernels/test_softmax.py",
          "tests/gpu_kernels/test_matmul.py"]
TASKS = ("elementwise.gelu_triton", "softmax.softmax_triton", "matmul.matmul_triton")


def build_tree(tmp_path: Path, modules: dict[str, str], base: Path = SOLUTION) -> Path:
    """`base`'s gpu_kernels package with `modules` (file name -> source) written over it."""
    tree = tmp_path / "tree"
    shutil.copytree(base, tree / "gpu_kernels", ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in modules.items():
        (tree / "gpu_kernels" / name).write_text(text)
    return tree


def folder(path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(path.glob("*.py"))}


def kernel_outcomes(tree: Path, tmp_path: Path) -> dict[str, str]:
    """The kernels' public and hidden tests against `tree`, GPU tests deselected (outcomes adds -m "not gpu")."""
    return outcomes(tree, tmp_path, *PUBLIC, *KERNEL_TESTS)


def findings(tree: Path) -> list:
    """What the grader's static checks find in the tree's gpu_kernels package (parsed, never imported)."""
    package = tree / "gpu_kernels"
    return scan_rules(package, "gpu_kernels", RULES) + scan_triton(package, "gpu_kernels", TRITON_RULES)


# ---- The reference, the stubs and correct alternatives ---------------------------------------------


def test_the_reference_passes_every_kernel_test_and_the_stubs_none(tmp_path):
    """Every public and hidden kernel test passes on the reference and fails on the stubs; no static rule
    fires on either."""
    found = kernel_outcomes(build_tree(tmp_path / "reference", {}), tmp_path / "reference")
    assert not_passed(found) == {} and len(found) >= 40
    stubs = build_tree(tmp_path / "stubs", {}, base=STUBS)
    found = kernel_outcomes(stubs, tmp_path / "stubs")
    assert {outcome for outcome in found.values()} == {"failed"}
    assert findings(build_tree(tmp_path / "clean", {})) == [] and findings(stubs) == []


@pytest.mark.parametrize("name", ["sigmoid_gelu"])
def test_an_alternative_passes_the_public_tests_and_the_hidden_suite(tmp_path, name):
    """A different but correct kernel earns every point, the design tests' included, and breaks no static
    rule."""
    tree = build_tree(tmp_path, folder(ALTERNATIVES / name))
    assert findings(tree) == []
    found = kernel_outcomes(tree, tmp_path)
    assert not_passed(found) == {} and len(found) >= 40


# ---- Wrong implementations ---------------------------------------------------------------------------


def replaced_by(name: str, module: str) -> list[tuple[str, str]]:
    """The edit that replaces the whole of the solution's `module` with that of tests/autograder/alternatives/
    gpu_kernels/<name>/: right values, a design the handout rules out."""
    return [((SOLUTION / module).read_text(), (ALTERNATIVES / name / module).read_text())]


# name: (module, [(text in the solution, its wrong replacement), ...], hidden module to run besides the design
# module, hidden tests it fails)
# A matmul without the K mask reads past the end of each row of a and b, whatever memory holds there: the
# tests it fails besides the two listed depend on that memory (MAY_ALSO_FAIL; the bias-loads test passed once,
# in a full run beside other work, where the memory past its one drawn case held zeros).
MAY_ALSO_FAIL = {"matmul without the mask on K": {"test_matmul_keeps_a_half_precision_dtype[bf16]",
                                                  "test_matmul_loads_the_bias_once_per_program",
                                                  "test_matmul_keeps_a_half_precision_dtype[fp16]",
                                                  "test_matmul_with_k_zero_is_the_epilogue_of_zero",
                                                  "test_matmul_epilogue_calls_gelu_tanh"}}
WRONG = {
    "gelu is the exact erf GeLU, not the tanh approximation": (
        "elementwise.py", [("    a = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2/pi) (x + 0.044715 x³)\n"
                            "    e = tl.exp(-2.0 * tl.abs(a))\n"
                            "    tanh = tl.where(a < 0, -1.0, 1.0) * (1.0 - e) / (1.0 + e)\n"
                            "    return 0.5 * x * (1.0 + tanh)",
                            "    return 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))")],
        HIDDEN, {"test_gelu_matches_float64_at_random_shapes_and_strides",
                 "test_matmul_fused_epilogue_at_random_shapes", "test_matmul_with_k_zero_is_the_epilogue_of_zero"}),
    "gelu reads a strided tensor as if it were dense": (
        "elementwise.py", [("dense = x.contiguous()", "dense = x")],
        HIDDEN, {"test_gelu_matches_float64_at_random_shapes_and_strides"}),
    "softmax without the maximum subtracted": (
        "softmax.py", [("e = tl.exp(x - tl.max(x, 0))", "e = tl.exp(x)")],
        HIDDEN, {"test_softmax_is_stable_where_exp_overflows",
                 "test_softmax_is_exact_where_every_value_of_a_row_is_far_below_zero"}),
    "softmax's running maximum starts at 0, not -inf": (
        "softmax.py", [('        m = float("-inf")', "        m = 0.0")],
        HIDDEN, {"test_softmax_is_exact_where_every_value_of_a_row_is_far_below_zero"}),
    "softmax forgets to rescale the running sum past one block": (
        "softmax.py", [("l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)",
                        "l = l + tl.sum(tl.exp(x - m_new), 0)")],
        HIDDEN, {"test_softmax_matches_float64_at_random_shapes_views_and_blocks",
                 "test_softmax_is_stable_where_exp_overflows", "test_softmax_keeps_a_half_precision_dtype[bf16]",
                 "test_softmax_keeps_a_half_precision_dtype[fp16]", "test_softmax_reads_each_element_once_per_pass"}),
    "softmax assumes rows of stride 1": (
        "softmax.py", [("rows.stride(0), rows.stride(1), n_cols", "rows.stride(0), 1, n_cols")],
        HIDDEN, {"test_softmax_matches_float64_at_random_shapes_views_and_blocks"}),
    "matmul without the mask on K": (
        "matmul.py", [("mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)",
                       "mask=rows[:, None] < M, other=0.0)"),
                      ("mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)",
                       "mask=cols[None, :] < N, other=0.0)")],
        HIDDEN, {"test_matmul_matches_float64_at_random_shapes", "test_matmul_fused_epilogue_at_random_shapes"}),
    "matmul adds the bias after the activation": (
        "matmul.py", [("    if HAS_BIAS:\n"
                       "        acc += tl.load(BIAS + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]\n", ""),
                      ("        acc = tl.maximum(acc, 0.0)\n",
                       "        acc = tl.maximum(acc, 0.0)\n    if HAS_BIAS:\n"
                       "        acc += tl.load(BIAS + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]\n")],
        HIDDEN, {"test_matmul_fused_epilogue_at_random_shapes", "test_matmul_keeps_a_half_precision_dtype[bf16]",
                 "test_matmul_keeps_a_half_precision_dtype[fp16]", "test_matmul_with_k_zero_is_the_epilogue_of_zero",
                 "test_matmul_loads_the_bias_once_per_program", "test_matmul_epilogue_calls_gelu_tanh"}),
    "matmul returns fp32 for bf16 and fp16 inputs": (
        "matmul.py", [("c = torch.empty((M, N), dtype=a.dtype, device=a.device)",
                       "c = torch.empty((M, N), dtype=torch.float32, device=a.device)")],
        HIDDEN, {"test_matmul_keeps_a_half_precision_dtype[bf16]", "test_matmul_keeps_a_half_precision_dtype[fp16]"}),
    "matmul reads b as if it were dense": (
        "matmul.py", [("*a.stride(), *b.stride(), *c.stride()", "*a.stride(), N, 1, *c.stride()")],
        HIDDEN, {"test_matmul_matches_float64_at_random_shapes"}),
    "matmul skips the input check": (
        "matmul.py", [("    check_matmul_inputs(a, b, bias, activation)\n    require_triton()",
                       "    require_triton()")],
        CONTRACT, {"test_matmul_rejects_random_bad_arguments"}),
    # right in the interpreter's increasing program order only: on a GPU a row's zeros may land after the next row
    "softmax stores a row's one block masked against the tensor's end, not the row's": (
        "softmax.py", [("tl.store(y_row + cols, (e / tl.sum(e, 0)).to(Y.dtype.element_ty), mask=mask)",
                        "tl.store(y_row + cols, (e / tl.sum(e, 0)).to(Y.dtype.element_ty), "
                        "mask=row * n_cols + cols < tl.num_programs(0) * n_cols)")],
        ORDER, {"test_kernels_give_the_same_output_in_any_program_order[softmax]"}),
    "softmax in three passes (maximum, sum, output)": (
        "softmax.py", replaced_by("three_pass_softmax", "softmax.py"),
        HIDDEN, {"test_softmax_reads_each_element_once_per_pass"}),
    "matmul tiles in row-major order, not grouped": (
        "matmul.py", replaced_by("row_major_matmul", "matmul.py"),
        HIDDEN, {"test_matmul_tile_of_follows_the_grouped_order"}),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_a_wrong_implementation_loses_the_points_of_what_it_breaks(tmp_path, name):
    """One small edit of the solution fails exactly the hidden tests of the property it breaks, in its hidden
    module and in the design module."""
    module, edits, hidden, expected = WRONG[name]
    text = (SOLUTION / module).read_text()
    for right, wrong in edits:
        assert text.count(right) == 1, f"the solution's {module} changed: update the edit of {right!r}"
        text = text.replace(right, wrong)
    tree = build_tree(tmp_path, {module: text})
    found = outcomes(tree, tmp_path, f"{SUITE}/{hidden}", f"{SUITE}/{DESIGN}")
    failed = {n.partition("::")[2] for n, outcome in not_passed(found).items() if outcome == "failed"}
    assert expected <= failed <= expected | MAY_ALSO_FAIL.get(name, set()), f"unexpected outcomes: {not_passed(found)}"


# ---- Cheats: right answers from torch behind a launched kernel -----------------------------------------

# Submissions that get right answers from torch instead of their Triton kernels: each is the reference
# module with a few lines added. Its kernel still launches, so the worker's own evidence alone would pass
# it; it must lose every point of its task. cheat: (module, the line added before the function's final
# return, lines added after `import torch`)
CHEATS = {
    # host code overwrites the kernel's output with torch.addmm / torch.mm
    "torch_fallback": ("matmul.py", "c.copy_(torch.addmm(bias, a, b) if bias is not None else torch.mm(a, b))", ""),
    # F.gelu imported as `nnf`, assigned to a module name and called through it
    "gelu_alias": ("elementwise.py", 'y.copy_(_act(x, approximate="tanh"))',
                   "from torch.nn import functional as nnf\n\n_act = nnf.gelu\n"),
    # a name built at run time
    "getattr_matmul": ("matmul.py", 'c.copy_(getattr(torch, "mat" + "mul")(a, b))', ""),
    # torch imported through __import__ and its softmax called
    "import_trick": ("softmax.py", 'y.copy_(__import__("tor" + "ch").softmax(x, dim=-1))', ""),
    # Tensor.softmax in host code
    "tensor_methods": ("softmax.py", "y.copy_(x.softmax(-1))", ""),
    # the @ operator in host code
    "matmul_operator": ("matmul.py", "c.copy_(a @ b)", ""),
}


def cheat(name: str) -> dict[str, str]:
    """The cheat's module: the reference's, with its lines added (file name -> source)."""
    module, line, header = CHEATS[name]
    source = (SOLUTION / module).read_text()
    at = source.rindex("\n    return ")
    source = source[:at] + "\n    " + line + source[at:]
    if header:
        source = source.replace("import torch\n", "import torch\n" + header, 1)
    return {module: source}


# cheat: (the task it targets, a word of its first finding's message)
CHEAT_FINDINGS = {
    "torch_fallback": ("matmul.matmul_triton", "torch.addmm"),
    "gelu_alias": ("elementwise.gelu_triton", "torch.nn.functional.gelu"),
    "getattr_matmul": ("matmul.matmul_triton", "built at run time"),
    "import_trick": ("softmax.softmax_triton", "__import__"),
    "tensor_methods": ("softmax.softmax_triton", ".softmax"),
    "matmul_operator": ("matmul.matmul_triton", "@"),
}


@pytest.mark.parametrize("name", sorted(CHEAT_FINDINGS))
def test_a_cheat_is_found_by_the_static_rules_and_loses_its_task(tmp_path, name):
    """Each cheat breaks a static rule that blocks its task (and so every test of it), with a message naming
    the call; its kernel still launches, so the worker's own evidence would not catch it."""
    task, word = CHEAT_FINDINGS[name]
    found = findings(build_tree(tmp_path, cheat(name)))
    assert found and word in found[0].message, [v.message for v in found]
    assert blocked(found, task), f"{name}: nothing blocks {task}"


def test_the_grader_gives_the_cheats_no_kernel_point(tmp_path, warm_grade):
    """Graded for real (sandboxed worker, static rules), a submission with a cheat in each kernel module earns
    no point of any kernel test, though its answers are right; each failed test names the rule it broke."""
    modules = {name: text for cheat_name in ("gelu_alias", "tensor_methods", "torch_fallback")
               for name, text in cheat(cheat_name).items()}
    report = warm_grade(build_tree(tmp_path, modules), assignment="gpu_kernels", select="not build")
    kernel_tests = [t for t in report.tests if t.task in TASKS and t.status != "not_graded"]
    assert len(kernel_tests) >= 40, f"the kernel tests did not run: {report.log}"
    assert [t.name for t in kernel_tests if t.points] == []
    for test in kernel_tests:
        assert test.status == "failed" and ("forbidden" in test.message or "host code" in test.message), \
            (test.name, test.message)


# ---- The GPU-only tests' own code -------------------------------------------------------------------


def test_the_gpu_tests_run_on_the_cpu_at_tiny_sizes(monkeypatch):
    """The hidden GPU tests cannot run without a GPU; their code (scenarios, trusted timing loops, output
    checks) runs here against solutions on the CPU instead (GPU = "cpu", the Triton interpreter, tiny
    sizes), the speed limits aside: so that a GPU grading run does not meet a typo first."""
    from autograder.harness.student import LocalStudent
    from autograder.suites.gpu_kernels import conftest as suite
    from autograder.suites.gpu_kernels import test_hidden_kernels as hidden

    monkeypatch.setattr(hidden, "GPU", "cpu")
    monkeypatch.setattr(hidden, "GPU_SIZES", (16, 40))
    monkeypatch.setattr(hidden, "GELU_GPU_SIZES", (16, 40))
    monkeypatch.setattr(hidden, "SPEED", {"gelu": dict(shapes=[[300]], iterations=2),
                                          "matmul": dict(shapes=[[40, 24], [24, 33]], iterations=2),
                                          "epilogue": dict(shapes=[[40, 24], [24, 33], [33]], iterations=2)})
    monkeypatch.setattr(hidden, "CHECKED_ROWS", 4)
    student, trusted, rng = LocalStudent(), suite.helpers(), random.Random(0)
    for dtype in (torch.bfloat16, torch.float16):
        hidden.test_gelu_half_precision_on_gpu(student, trusted, rng, dtype)
        hidden.test_matmul_half_precision_on_gpu(student, trusted, rng, dtype)
    ratio, ratios = hidden.speed_ratio(student, trusted, rng, "gelu",
                                       lambda x: torch.nn.functional.gelu(x, approximate="tanh"))
    assert len(ratios) == 5
    ratio, ratios = hidden.speed_ratio(student, trusted, rng, "matmul", torch.matmul)
    assert len(ratios) == 5
    for kernel in ("epilogue", "unfused"):
        seconds, _, check = hidden.timed_student(student, trusted, rng, kernel, "gelu")
        assert seconds() > 0
        check()
