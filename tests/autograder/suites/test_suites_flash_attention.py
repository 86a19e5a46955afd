"""The hidden flash_attention suite, tested: correct alternatives earn every point, wrong ones lose theirs.

An implementation tree is built in tmp_path: solutions/flash_attention copied, then either an
alternative's modules on top (tests/autograder/alternatives/flash_attention/<name>/) or one small edit
of a solution module. The public tests and the hidden suite run against it in-process, in a subprocess
(`pytest ... --impl TREE`), with a fixed seed so that each run draws the same cases; GPU tests are
deselected (they are "not graded" without a GPU, and need one to mean anything). In-process, the tests
that need the reference solution are skipped, so one alternative is also graded by the real grader.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from tests.pytest_run import run_pytest

ROOT = Path(__file__).resolve().parents[3]
SOLUTION = ROOT / "solutions" / "flash_attention"
ALTERNATIVES = Path(__file__).resolve().parents[1] / "alternatives" / "flash_attention"
SUITE = "autograder/suites/flash_attention"
PUBLIC = "tests/flash_attention"
SEED = "20261202"


def build_tree(tmp_path: Path, modules: dict[str, str]) -> Path:
    """solutions' flash_attention package with `modules` (file name -> source) written over it."""
    tree = tmp_path / "tree"
    shutil.copytree(SOLUTION, tree / "flash_attention", ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in modules.items():
        (tree / "flash_attention" / name).write_text(text)
    return tree


def outcomes(tree: Path, tmp_path: Path, *paths: str) -> dict[str, str]:
    """Run pytest on `paths` against `tree` in a subprocess: {test id: passed, failed, error or skipped}."""
    junit = tmp_path / "junit.xml"
    command = [sys.executable, "-m", "pytest", *paths, "--impl", str(tree), "--seed", SEED, "-q", "-m", "not gpu",
               "-p", "no:cacheprovider", f"--junitxml={junit}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # as in the grader's worker: many small ops, no oversubscription
    done = run_pytest(command[3:], ROOT, env, timeout=600)
    assert junit.exists(), f"pytest did not run:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "")  # public and hidden modules share file names: keep the package
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(kinds[0] if kinds else "", "passed")
        found[f"{module}::{case.get('name')}"] = outcome
    assert found, f"no test ran:\n{done.stdout[-3000:]}"
    return found


def not_passed(found: dict[str, str]) -> dict[str, str]:
    return {name: outcome for name, outcome in found.items() if outcome != "passed"}


# ---- Correct alternatives --------------------------------------------------------------------------


def alternative(name: str) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted((ALTERNATIVES / name).glob("*.py"))}


def files_reading(module: str) -> list[str]:
    """The public and hidden test files that name `module` (the others never import it)."""
    return [str(path.relative_to(ROOT)) for folder in (PUBLIC, SUITE) for path in sorted((ROOT / folder).glob("test_*.py"))
            if module.removesuffix(".py") in path.read_text()]


@pytest.mark.parametrize("name", ["atomic_dq"])  # normalised_output: graded by the real grader below
def test_an_alternative_passes_the_public_tests_and_the_hidden_suite(tmp_path, name):
    """Every public and hidden test that reads the modules a different but correct implementation replaces
    passes on it (in-process)."""
    modules = alternative(name)
    tree = build_tree(tmp_path, modules)
    files = sorted({path for module in modules for path in files_reading(module)})
    found = outcomes(tree, tmp_path, *files)
    assert not_passed(found) == {}
    assert {name.partition("::")[0] for name in found} == {path.removesuffix(".py").replace("/", ".") for path in files}
    assert len(found) > 25 and any(path.startswith(SUITE) for path in files)


def test_an_alternative_earns_full_marks_from_the_grader(tmp_path, warm_grade):
    """Graded by the real grader (sandboxed worker, reference present), an alternative loses no point: every
    public and hidden test passes, the compile checks included, or needs a GPU."""
    tree = build_tree(tmp_path, alternative("normalised_output"))
    report = warm_grade(tree, assignment="flash_attention")
    assert len(report.tests) > 80, f"the grader produced too few results: {report.log}"
    lost = [(t.name, t.status, t.message[:300]) for t in report.tests if t.status not in ("passed", "not_graded", "manual")]
    assert lost == []
    hidden = [t for t in report.tests if t.visibility != "visible"]
    assert hidden and all(t.name.startswith(SUITE) for t in hidden)


# ---- Wrong implementations -------------------------------------------------------------------------

# name: (module, [(text in the solution, its wrong replacement), ...], hidden module to run, hidden tests it fails)
WRONG = {
    "forward masks causal tiles instead of skipping them": (
        "flash_pytorch.py", [("n_keys = q_end if is_causal else k.shape[-2]", "n_keys = k.shape[-2]")],
        "test_flash_pytorch.py", {"test_causal_forward_skips_the_tiles_above_the_diagonal"}),
    "backward masks causal tiles instead of skipping them": (
        "flash_pytorch.py", [("range(k_start if is_causal else 0, q.shape[-2], q_tile)",
                              "range(0, q.shape[-2], q_tile)")],
        "test_flash_pytorch.py", {"test_causal_backward_skips_the_tiles_above_the_diagonal"}),
    "forward builds the whole score matrix once": (
        "flash_pytorch.py", [("    for q_start in range(0, n_queries, q_tile):",
                              "    row_max = (q3.float() @ k3.float().transpose(-1, -2)).amax(-1)\n"
                              "    for q_start in range(0, n_queries, q_tile):")],
        "test_flash_pytorch.py", {"test_forward_never_materialises_the_scores_near_n_1024",
                                  "test_causal_forward_skips_the_tiles_above_the_diagonal"}),
    "forward builds the whole score matrix once, out= into a buffer made at import": (
        "flash_pytorch.py", [("def flash_forward_pytorch(",
                              "_SCORES = torch.empty(1 << 21)\n\n\ndef flash_forward_pytorch("),
                             ("    o = torch.empty_like(q3)\n",
                              "    o = torch.empty_like(q3)\n"
                              "    scores = _SCORES[:n_queries * k3.shape[-2]].view(n_queries, -1)\n"
                              "    row_max = torch.matmul(q3[0].float(), k3[0].float().T, out=scores).amax(-1)\n")],
        "test_flash_pytorch.py", {"test_forward_never_materialises_the_scores_near_n_1024",
                                  "test_causal_forward_skips_the_tiles_above_the_diagonal"}),
    "backward recomputes the whole probability matrix once": (
        "flash_pytorch.py", [("    delta = (o3 * do3).sum(dim=-1)",
                              "    p = torch.exp(q3 @ k3.transpose(-1, -2) / math.sqrt(head_dim) - lse3[..., None])\n"
                              "    delta = (o3 * do3).sum(dim=-1)")],
        "test_flash_pytorch.py", {"test_autograd_function_backward_never_materialises_the_scores_near_n_1024",
                                  "test_causal_backward_skips_the_tiles_above_the_diagonal"}),
    "the Function saves a second row vector": (
        "flash_pytorch.py", [("ctx.save_for_backward(q, k, v, o, lse)",
                              "ctx.save_for_backward(q, k, v, o, lse, lse.exp())"),
                             ("q, k, v, o, lse = ctx.saved_tensors", "q, k, v, o, lse = ctx.saved_tensors[:5]")],
        "test_flash_pytorch.py", {"test_autograd_function_saves_the_lse_and_no_score_matrix"}),
    "backward forgets dk's scale": (
        "flash_pytorch.py", [("dk += (ds.transpose(-1, -2) @ q[:, rows]) * scale",
                              "dk += ds.transpose(-1, -2) @ q[:, rows]")],
        "test_flash_pytorch.py", {"test_backward_matches_float64_autograd_at_random_shapes_and_tiles",
                                  "test_backward_returns_the_gradients_in_the_input_dtype",
                                  "test_autograd_function_matches_float64_at_random_shapes",
                                  "test_autograd_function_backward_never_materialises_the_scores_near_n_1024",
                                  "test_no_leading_dims_at_all", "test_two_tilings_agree"}),
    "forward skips the input check": (
        "flash_pytorch.py", [("    check_attention_inputs(q, k, v, is_causal)\n    _check_tiles(q_tile, k_tile)\n"
                              "    n_queries, head_dim = q.shape[-2:]", "    n_queries, head_dim = q.shape[-2:]")],
        "test_contract.py", {"test_pytorch_forward_and_function_reject_random_bad_inputs"}),
    "triton lse left in log2 units": (
        "flash_triton.py", [("lse = (m + tl.log2(l)) * LN2", "lse = m + tl.log2(l)")],
        "test_flash_triton.py", {"test_triton_forward_matches_float64_at_random_shapes",
                                 "test_triton_forward_is_exact_where_every_score_of_a_row_is_far_below_zero",
                                 "test_triton_forward_takes_a_transposed_q_and_an_expanded_k_and_v",
                                 "test_triton_autograd_function_matches_float64_at_a_random_shape",
                                 "test_triton_autograd_function_takes_an_expanded_gradient",
                                 "test_triton_causal_forward_skips_the_tiles_above_the_diagonal"}),
    "triton forward recomputes o in torch": (
        "flash_triton.py", [("    return o.reshape(q.shape), lse.reshape(q.shape[:-1])",
                             "    above = torch.ones(n_queries, n_keys, dtype=torch.bool).triu(1) & is_causal\n"
                             "    scores = (q3 @ k3.transpose(-1, -2) / math.sqrt(head_dim))"
                             ".masked_fill(above, -math.inf)\n"
                             "    o = torch.softmax(scores, dim=-1) @ v3\n"
                             "    return o.reshape(q.shape), lse.reshape(q.shape[:-1])")],
        "test_flash_triton.py", {"test_triton_forward_matches_float64_at_random_shapes",
                                 "test_triton_forward_is_exact_where_every_score_of_a_row_is_far_below_zero",
                                 "test_triton_forward_takes_a_transposed_q_and_an_expanded_k_and_v",
                                 "test_triton_autograd_function_matches_float64_at_a_random_shape",
                                 "test_triton_autograd_function_takes_an_expanded_gradient"}),
    "triton forward masks causal tiles instead of skipping them": (
        "flash_triton.py", [("acc, l, m = _fwd_key_loop(acc, l, m, q, K, V, rows, below, tl.minimum(q_start + Q_TILE, "
                             "n_keys), n_keys,", "acc, l, m = _fwd_key_loop(acc, l, m, q, K, V, rows, below, n_keys, "
                                                 "n_keys,")],
        "test_flash_triton.py", {"test_triton_causal_forward_skips_the_tiles_above_the_diagonal"}),
    "triton accepts tiles that are not powers of two": (
        "flash_triton.py", [("tile < 16 or tile & (tile - 1)", "tile < 16")],
        "test_contract.py", {"test_triton_forward_rejects_random_bad_inputs_and_tiles",
                             "test_triton_backward_rejects_random_bad_inputs_and_tiles"}),
    "flash bytes computed through floats": (
        "analysis.py", [("    return batch * heads * per_head\n", "    return int(float(batch * heads) * per_head)\n")],
        "test_analysis.py", {"test_byte_counts_stay_exact_beyond_two_to_the_53"}),
    "flash bytes count the lse in the input dtype": (
        "analysis.py", [("* bytes_per_element + 4 * n_queries", "* bytes_per_element + bytes_per_element * n_queries")],
        "test_analysis.py", {"test_flash_bytes_follow_the_counting_rule_at_random_tiles",
                             "test_byte_counts_stay_exact_beyond_two_to_the_53"}),
    "the running maximum starts at 0, not -inf": (
        "flash_pytorch.py", [("m = torch.full(q_rows.shape[:-1], float(\"-inf\"), device=q_rows.device)",
                              "m = torch.zeros(q_rows.shape[:-1], device=q_rows.device)")],
        "test_flash_pytorch.py", {"test_forward_is_exact_where_every_score_of_a_row_is_far_below_zero"}),
    "triton's running maximum starts at 0, not -inf": (
        "flash_triton.py", [("m = tl.full([Q_TILE], float(\"-inf\"), dtype=tl.float32)",
                             "m = tl.zeros([Q_TILE], dtype=tl.float32)")],
        "test_flash_triton.py", {"test_triton_forward_is_exact_where_every_score_of_a_row_is_far_below_zero"}),
    "triton forward assumes dense inputs": (
        "flash_triton.py", [("q3, k3, v3, o, lse, *q3.stride(), *k3.stride(), *v3.stride(), *o.stride(),",
                             "q3, k3, v3, o, lse, n_queries * head_dim, head_dim, 1, n_keys * head_dim, head_dim, 1, "
                             "n_keys * head_dim, head_dim, 1, *o.stride(),")],
        "test_flash_triton.py", {"test_triton_forward_takes_a_transposed_q_and_an_expanded_k_and_v"}),
    "triton backward writes dk and dv with the strides of an expanded k and v": (
        "flash_triton.py", [("    k3, v3 = (x.reshape(-1, n_keys, head_dim).contiguous() for x in (k, v))",
                             "    k3, v3 = (x.reshape(-1, n_keys, head_dim) for x in (k, v))")],
        "test_flash_triton.py", {"test_triton_backward_takes_a_transposed_q_and_an_expanded_k_and_v"}),
    "backward returns float32 gradients for bfloat16 inputs": (
        "flash_pytorch.py", [("return dq.to(q.dtype).reshape(q.shape), dk.to(k.dtype).reshape(k.shape), "
                              "dv.to(v.dtype).reshape(v.shape)",
                              "return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)")],
        "test_flash_pytorch.py", {"test_backward_returns_the_gradients_in_the_input_dtype"}),
    "the counts accept a whole float head_dim": (
        "analysis.py", [("if type(value) is not int or value <= 0:",
                         "if (type(value) is not int and name != \"head_dim\") or value <= 0:")],
        "test_analysis.py", {"test_counts_reject_random_bad_sizes"}),
    "backward FLOPs counted as two forwards": (
        "analysis.py", [("flops *= 2.5", "flops *= 2")],
        "test_analysis.py", {"test_attention_flops_at_random_sizes"}),
    "reference causal mask hides the diagonal too": (
        "reference.py", [(".triu(1)", ".triu(0)")],
        "test_reference.py", {"test_attention_matches_float64_at_random_shapes",
                              "test_attention_keeps_the_input_dtype_at_a_random_shape[float64]",
                              "test_attention_keeps_the_input_dtype_at_a_random_shape[bfloat16]"}),
    "online softmax forgets to rescale the running sum": (
        "flash_pytorch.py", [("l = alpha * l + p.sum(dim=-1)", "l = l + p.sum(dim=-1)")],
        "test_flash_pytorch.py", {"test_forward_matches_float64_at_random_shapes_and_tiles", "test_two_tilings_agree",
                                  "test_no_leading_dims_at_all", "test_autograd_function_matches_float64_at_random_shapes",
                                  "test_autograd_function_saves_the_lse_and_no_score_matrix",
                                  "test_forward_never_materialises_the_scores_near_n_1024",
                                  "test_autograd_function_backward_never_materialises_the_scores_near_n_1024"}),
    "tile mask hides the diagonal too": (
        "flash_pytorch.py", [("rows[:, None] < cols[None, :]", "rows[:, None] <= cols[None, :]")],
        "test_flash_pytorch.py", {"test_forward_matches_float64_at_random_shapes_and_tiles",
                                  "test_forward_is_exact_where_every_score_of_a_row_is_far_below_zero",
                                  "test_backward_matches_float64_autograd_at_random_shapes_and_tiles",
                                  "test_backward_returns_the_gradients_in_the_input_dtype",
                                  "test_two_tilings_agree", "test_autograd_function_matches_float64_at_random_shapes",
                                  "test_autograd_function_backward_never_materialises_the_scores_near_n_1024"}),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_a_wrong_implementation_loses_the_points_of_what_it_breaks(tmp_path, name):
    """One small edit of the solution fails exactly the hidden tests of the property it breaks."""
    module, edits, hidden, expected = WRONG[name]
    text = (SOLUTION / module).read_text()
    for right, wrong in edits:
        assert text.count(right) == 1, f"the solution's {module} changed: update the edit of {right!r}"
        text = text.replace(right, wrong)
    tree = build_tree(tmp_path, {module: text})
    found = outcomes(tree, tmp_path, f"{SUITE}/{hidden}")
    failed = {n.partition("::")[2] for n, outcome in not_passed(found).items() if outcome == "failed"}
    assert failed == expected, f"unexpected outcomes: {not_passed(found)}"


# ---- The GPU-only tests' own code -------------------------------------------------------------------


def test_the_gpu_tests_run_on_the_cpu_at_tiny_sizes(monkeypatch):
    """The hidden GPU tests cannot run without a GPU; their code (scenarios, trusted timing loop, output
    checks) runs here against solutions on the CPU instead (GPU = "cpu", the Triton interpreter, tiny
    sizes), the speed limits aside: so that a GPU grading run does not meet a typo first."""
    from autograder.harness.plugin import Reference
    from autograder.harness.student import LocalStudent
    from autograder.suites.flash_attention import conftest as suite
    from autograder.suites.flash_attention import test_flash_pytorch as pytorch_tests
    from autograder.suites.flash_attention import test_flash_triton as triton_tests

    tiny = dict(lengths=(8, 40), head_dims=(16, 32), lead_ranks=(1,), lead_sizes=(1, 2))
    for module in (pytorch_tests, triton_tests):
        monkeypatch.setattr(module, "GPU", "cpu")
        monkeypatch.setattr(module, "GPU_CASE", tiny)
    monkeypatch.setattr(triton_tests, "SPEED", {**triton_tests.SPEED, "lead": [1, 2], "n": 24, "head_dim": 16})
    monkeypatch.setattr(triton_tests, "ITERATIONS", {False: 2, True: 1})
    monkeypatch.setattr(triton_tests, "CHECKED_ROWS", 8)
    student, trusted, rng = LocalStudent(), suite.helpers(), random.Random(0)
    for dtype in (torch.bfloat16, torch.float16):
        pytorch_tests.test_forward_half_precision_on_gpu(student, trusted, rng, dtype)
        pytorch_tests.test_autograd_function_half_precision_on_gpu(student, trusted, rng, dtype)
        triton_tests.test_triton_forward_half_precision_on_gpu(student, trusted, rng, dtype)
        triton_tests.test_triton_gradients_half_precision_on_gpu(student, trusted, rng, dtype)
    ratio, ratios = triton_tests.timed_ratio(student, trusted, rng, False,
                                             lambda q, k, v, do: trusted.naive(q, k, v, True))
    assert ratio > 0 and len(ratios) == 5
    function = Reference().module("flash_attention.flash_triton").FlashAttentionTriton

    def reference_step(q, k, v, do):
        leaves = [t.requires_grad_() for t in (q, k, v)]
        torch.autograd.grad(function.apply(*leaves, True), leaves, do)

    ratio, ratios = triton_tests.timed_ratio(student, trusted, rng, True, reference_step)
    assert ratio > 0 and len(ratios) == 5
