"""The hidden resource_accounting suite, tested: correct alternatives earn every point, wrong ones lose theirs.

An implementation tree is built in tmp_path: solutions/resource_accounting copied, then either an
alternative's modules on top (tests/autograder/alternatives/resource_accounting/<name>/) or one small
edit of a solution module. The public tests and the hidden suite run against it in-process, in a
subprocess (`pytest ... --impl TREE`), with a fixed seed so that each run draws the same cases; GPU tests
are deselected (they are "not graded" without a GPU). In-process, the tests that need the reference
solution are skipped, so one alternative is also graded by the real grader.
"""

from __future__ import annotations

import ast
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.pytest_run import run_pytest

ROOT = Path(__file__).resolve().parents[3]
SOLUTION = ROOT / "solutions" / "resource_accounting"
ALTERNATIVES = Path(__file__).resolve().parents[1] / "alternatives" / "resource_accounting"
SUITE = "autograder/suites/resource_accounting"
PUBLIC = "tests/resource_accounting"
SEED = "20261203"


def build_tree(tmp_path: Path, modules: dict[str, str]) -> Path:
    """solutions' resource_accounting package with `modules` (file name -> source) written over it."""
    tree = tmp_path / "tree"
    shutil.copytree(SOLUTION, tree / "resource_accounting", ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in modules.items():
        (tree / "resource_accounting" / name).write_text(text)
    return tree


def outcomes(tree: Path, tmp_path: Path, *paths: str) -> dict[str, str]:
    """Run pytest on `paths` against `tree` in a subprocess: {test id: passed, failed, error or skipped}."""
    junit = tmp_path / "junit.xml"
    command = [sys.executable, "-m", "pytest", *paths, "--impl", str(tree), "--seed", SEED, "-q", "-m", "not gpu",
               "-p", "no:cacheprovider", f"--junitxml={junit}"]
    done = run_pytest(command[3:], ROOT, timeout=600)
    assert junit.exists(), f"pytest did not run:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").rpartition(".")[2]
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(kinds[0] if kinds else "", "passed")
        found[f"{module}::{case.get('name')}"] = outcome
    assert found, f"no test ran:\n{done.stdout[-3000:]}"
    return found


def not_passed(found: dict[str, str]) -> dict[str, str]:
    return {name: outcome for name, outcome in found.items() if outcome != "passed"}


# ---- Correct alternatives --------------------------------------------------------------------------

NEEDS_REFERENCE = {"test_hidden_flops::test_flop_counter_counts_elementwise_ops_of_the_backward_like_the_reference",
                   "test_hidden_training::test_saved_activation_bytes_matches_the_reference_on_random_op_chains"}


def alternative(name: str) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted((ALTERNATIVES / name).glob("*.py"))}


@pytest.mark.parametrize("name", ["shape_counting", "sequential_checkpoint"])
def test_an_alternative_passes_the_public_tests_and_the_hidden_suite(tmp_path, name):
    """Every public and hidden test passes on a different but correct implementation (in-process); only the
    tests that need the reference solution are skipped."""
    tree = build_tree(tmp_path, alternative(name))
    found = outcomes(tree, tmp_path, PUBLIC, SUITE)
    assert not_passed(found) == {name: "skipped" for name in NEEDS_REFERENCE}
    assert len(found) > 150


def test_the_alternatives_together_earn_full_marks_from_the_grader(tmp_path, warm_grade):
    """Graded by the real grader (sandboxed worker, reference present), the two alternatives together (their
    modules do not overlap) lose no point, the tests that need the reference included."""
    first, second = alternative("shape_counting"), alternative("sequential_checkpoint")
    assert not set(first) & set(second), "the alternatives replace the same module: grade them one at a time"
    tree = build_tree(tmp_path, {**first, **second})
    report = warm_grade(tree, assignment="resource_accounting")
    assert report.tests, f"the grader produced no results: {report.log}"
    lost = [(t.name, t.status, t.message[:300]) for t in report.tests if t.status not in ("passed", "not_graded", "manual")]
    assert lost == []
    hidden = [t for t in report.tests if t.visibility != "visible"]
    assert len(hidden) > 70 and all(t.name.startswith(SUITE) for t in hidden)
    assert {t.visibility for t in hidden} == {"hidden", "after_due_date"}
    assert {t.name.rpartition("::")[2] for t in hidden if t.status == "passed"} >= {n.partition("::")[2]
                                                                                    for n in NEEDS_REFERENCE}


# ---- Wrong implementations -------------------------------------------------------------------------

# name: (module, [(text in the solution, its wrong replacement), ...], hidden module to run, hidden tests it fails)
WRONG = {
    "memory counts the storage, not the view": (
        "memory.py", [("return x.numel() * x.element_size()", "return x.untyped_storage().nbytes()")],
        "test_hidden_memory.py", {"test_memory_usage_is_numel_times_element_size_for_random_views_and_dtypes",
                                  "test_memory_usage_of_huge_meta_tensors_is_exact"}),
    "underflow ignores subnormals": (
        "memory.py", [("return value != 0 and rounded.item() == 0",
                       "return value != 0 and abs(value) < torch.finfo(dtype).smallest_normal")],
        "test_hidden_memory.py", {"test_underflows_to_zero_agrees_with_torch_casts_at_random_magnitudes",
                                  "test_underflows_to_zero_rounds_to_nearest_at_the_subnormal_boundary"}),
    "bmm forgets its batch": (
        "flops.py", [("batch = a[0] if len(a) == 3 else 1", "batch = 1")],
        "test_hidden_flops.py", {"test_flop_counter_matches_flop_counter_mode_on_random_matmul_mixes",
                                 "test_flop_counter_matches_flop_counter_mode_on_random_attention_layers",
                                 "test_each_flop_counter_counts_only_its_own_block"}),
    "elementwise counts the first input, not the output": (
        "flops.py", [("flops = out.numel()", "flops = args[0].numel()")],
        "test_hidden_flops.py", {"test_flop_counter_counts_random_elementwise_ops_per_output_element"}),
    "split_heads interleaves the heads": (
        "einops_ops.py", [('"... seq (heads d) -> ... heads seq d"', '"... seq (d heads) -> ... heads seq d"')],
        "test_hidden_einops_ops.py", {"test_split_heads_gives_head_h_features_h_d_to_h_d_plus_d_for_random_shapes",
                                      "test_merge_heads_and_split_heads_are_inverse_for_random_shapes",
                                      "test_einops_functions_accept_non_contiguous_inputs[split_heads]"}),
    "activation bytes as the lecture counts them": (
        "network.py", [("return (num_layers + 1) * batch_size * dim", "return 2 * num_layers * batch_size * dim")],
        "test_hidden_network.py", {
            "test_activation_bytes_are_l_plus_1_b_d_elements_at_random_sizes",
            "test_activation_bytes_agrees_with_saved_activation_bytes_at_random_sizes_and_dtypes"}),
    "parameters counted only where they require grad": (
        "network.py", [("sum(p.numel() for p in model.parameters())",
                        "sum(p.numel() for p in model.parameters() if p.requires_grad)")],
        "test_hidden_network.py", {"test_get_num_parameters_counts_tied_weights_once_and_frozen_ones_too"}),
    "saved bytes count each saved view": (
        "training.py", [("storages[storage.data_ptr()] = storage", "storages[id(tensor)] = storage")],
        "test_hidden_training.py", {"test_saved_activation_bytes_counts_each_storage_once_for_random_views",
                                    "test_saved_activation_bytes_excludes_parameters_of_random_mlps"}),
    "accumulation does not scale the micro-batch losses": (
        "training.py", [("loss = loss_fn(model(x), y) / num_micro_batches", "loss = loss_fn(model(x), y)")],
        "test_hidden_training.py", {
            "test_accumulated_step_leaves_the_model_as_one_full_batch_step_at_random_micro_batch_counts",
            "test_accumulated_step_ignores_stale_gradients",
            "test_accumulated_step_returns_the_full_batch_mean_loss_at_random_cases"}),
    "accumulation keeps stale gradients": (
        "training.py", [("    optimizer.zero_grad()\n", "")],
        "test_hidden_training.py", {"test_accumulated_step_ignores_stale_gradients"}),
    "accumulation steps after every micro-batch": (
        "training.py", [("        total += loss.item()\n    optimizer.step()\n",
                         "        total += loss.item()\n        optimizer.step()\n")],
        "test_hidden_training.py", {
            "test_accumulated_step_leaves_the_model_as_one_full_batch_step_at_random_micro_batch_counts",
            "test_accumulated_step_ignores_stale_gradients",
            "test_accumulated_step_steps_the_optimizer_exactly_once",
            "test_accumulated_step_returns_the_full_batch_mean_loss_at_random_cases"}),
    "checkpointed_forward checkpoints nothing": (
        "training.py", [("x = checkpoint(run, layers[start:start + size], x, use_reentrant=False)",
                         "x = run(layers[start:start + size], x)")],
        "test_hidden_training.py", {
            "test_checkpointed_saved_bytes_stay_within_the_bound_at_random_sizes",
            "test_checkpointing_16_layers_in_4_segments_saves_less_than_half_at_random_widths"}),
    "autocast casts the float32 output": (
        "training.py", [("    with torch.autocast(device_type=x.device.type, dtype=dtype):\n        return model(x)",
                         "    return model(x).to(dtype)")],
        "test_hidden_training.py", {"test_autocast_forward_output_and_parameter_dtypes_for_random_networks"}),
    "checkpointing with the reentrant variant (no weight gradients for an input that needs none)": (
        "training.py", [("x = checkpoint(run, layers[start:start + size], x, use_reentrant=False)",
                         "x = checkpoint(run, layers[start:start + size], x, use_reentrant=True)")],
        "test_hidden_training.py", {"test_checkpointed_forward_keeps_output_and_gradients_at_random_segment_counts"}),
    "checkpointed forward run without autograd (saves nothing, so no gradient)": (
        "training.py", [("        x = checkpoint(run, layers[start:start + size], x, use_reentrant=False)",
                         "        with torch.no_grad():\n            x = run(layers[start:start + size], x)")],
        "test_hidden_training.py", {"test_checkpointed_forward_keeps_output_and_gradients_at_random_segment_counts"}),
    "elementwise counting includes in-place ops": (
        "flops.py", [("packet in (aten.add, aten.sub, aten.mul, aten.div)",
                      "packet in (aten.add, aten.sub, aten.mul, aten.div, aten.add_, aten.mul_)")],
        "test_hidden_flops.py", {"test_flop_counter_does_not_count_in_place_elementwise_ops"}),
    "compute-bound only strictly above the ridge": (
        "flops.py", [("_number(\"intensity\", intensity, positive=False) >= ridge_point(",
                      "_number(\"intensity\", intensity, positive=False) > ridge_point(")],
        "test_hidden_flops.py", {"test_is_compute_bound_compares_with_the_ridge_at_random_figures"}),
    "the roofline ignores the peak": (
        "flops.py", [("return min(_number(\"peak\", peak), intensity * _number(\"bandwidth\", bandwidth))",
                      "return intensity * _number(\"bandwidth\", bandwidth) if _number(\"peak\", peak) else 0.0")],
        "test_hidden_flops.py", {"test_attainable_flops_follow_the_roofline_at_random_figures"}),
    "training days ignore the MFU": (
        "flops.py", [("* _number(\"peak_flops_per_gpu\", peak_flops_per_gpu) * mfu",
                      "* _number(\"peak_flops_per_gpu\", peak_flops_per_gpu)")],
        "test_hidden_flops.py", {"test_training_days_at_random_figures",
                                 "test_mfu_is_achieved_rate_over_peak_and_inverts_training_days"}),
    "max trainable parameters rounded up": (
        "memory.py", [("return _count(\"memory_bytes\", memory_bytes) // _count(\"bytes_per_parameter\", "
                       "bytes_per_parameter, minimum=1)",
                       "return -(-_count(\"memory_bytes\", memory_bytes) // _count(\"bytes_per_parameter\", "
                       "bytes_per_parameter, minimum=1))")],
        "test_hidden_memory.py", {"test_max_trainable_parameters_is_the_largest_count_that_fits"}),
    "block weights not scaled by 1/sqrt(dim)": (
        "network.py", [("torch.randn(dim, dim) / math.sqrt(dim)", "torch.randn(dim, dim)")],
        "test_hidden_network.py", {"test_block_weight_is_seeded_randn_over_sqrt_dim_at_random_seeds_and_widths"}),
    "tied weights counted twice": (
        "network.py", [("sum(p.numel() for p in model.parameters())",
                        "sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))")],
        "test_hidden_network.py", {"test_get_num_parameters_counts_tied_weights_once_and_frozen_ones_too"}),
    "autocast left on after the forward": (
        "training.py", [("    with torch.autocast(device_type=x.device.type, dtype=dtype):\n        return model(x)",
                         "    torch.autocast(device_type=x.device.type, dtype=dtype).__enter__()\n    return model(x)")],
        "test_hidden_training.py", {"test_autocast_is_off_again_after_autocast_forward"}),
    "FlopCounter counts relu as an elementwise op": (
        "flops.py", [("packet in (aten.add, aten.sub, aten.mul, aten.div)",
                      "packet in (aten.add, aten.sub, aten.mul, aten.div, aten.relu)")],
        "test_hidden_flops.py", {"test_flop_counter_counts_random_elementwise_ops_per_output_element",
                                 "test_flop_counter_does_not_count_in_place_elementwise_ops"}),
    "FlopCounter counts every op whose name starts like a counted one (rsub, addcmul)": (
        "flops.py", [("packet in (aten.add, aten.sub, aten.mul, aten.div)",
                      "str(packet).split('.')[1].startswith(('add', 'sub', 'mul', 'div')) "
                      "and not str(packet).endswith('_')")],
        "test_hidden_flops.py", {"test_flop_counter_counts_random_elementwise_ops_per_output_element",
                                 "test_flop_counter_does_not_count_in_place_elementwise_ops"}),
    "float_format accepts any floating-point dtype but float64": (
        "memory.py", [("    if dtype not in FORMATS:\n",
                       "    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point) or dtype == torch.float64:\n")],
        "test_hidden_memory.py", {"test_float_format_raises_type_error_for_random_other_dtypes"}),
    "autocast_forward accepts float32": (
        "training.py", [("if dtype not in (torch.bfloat16, torch.float16):",
                         "if dtype not in (torch.bfloat16, torch.float16, torch.float32):")],
        "test_hidden_training.py", {"test_autocast_forward_rejects_random_other_dtypes"}),
    "accumulation returns the last micro-batch's loss": (
        "training.py", [("        total += loss.item()\n", "        total = loss.item()\n")],
        "test_hidden_training.py", {"test_accumulated_step_returns_the_full_batch_mean_loss_at_random_cases"}),
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


# ---- Attacks: values and measurements the submission controls gain nothing ---------------------------

def marked_with(tasks: set[str], *paths: str) -> set[str]:
    """module::name of every test in `paths` (files or folders) marked task(...) with one of `tasks`."""
    found = set()
    for path in (p for given in paths for p in sorted((ROOT / given).glob("**/test_*.py") if (ROOT / given).is_dir()
                                                      else [ROOT / given])):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(d, ast.Call) and ast.unparse(d.func) == "pytest.mark.task" and d.args
                    and isinstance(d.args[0], ast.Constant) and d.args[0].value in tasks for d in node.decorator_list):
                found.add(f"{path.stem}::{node.name}")
    return found


EMPTY = ("matmul_arithmetic_intensity", "ridge_point", "attainable_flops_per_sec", "mfu",
         "decode_arithmetic_intensity", "prefill_arithmetic_intensity")


def test_numbers_that_equal_any_approx_earn_nothing(tmp_path):
    """Functions that return an empty tensor, which `== pytest.approx(x)` holds for (pytest compares every element
    of an array-like, and there are none), fail every public and hidden test of their tasks: the tests ask for a
    float first."""
    text = (SOLUTION / "flops.py").read_text()
    text += "".join(f"\n\ndef {name}(*args, **kwargs):\n    return torch.empty(0)\n" for name in EMPTY)
    found = outcomes(build_tree(tmp_path, {"flops.py": text}), tmp_path, f"{PUBLIC}/test_flops.py",
                     f"{SUITE}/test_hidden_flops.py")
    mine = marked_with({f"flops.{name}" for name in EMPTY}, f"{PUBLIC}/test_flops.py", f"{SUITE}/test_hidden_flops.py")
    assert len(mine) >= 12
    assert {name for name, outcome in found.items() if outcome == "passed" and name.partition("[")[0] in mine} == set()
    assert {name.partition("[")[0] for name in found} >= mine, "a test of these tasks did not run"


def test_a_checkpointed_forward_that_measures_itself_as_free_loses_the_memory_points(tmp_path):
    """checkpointed_forward is model(x), and saved_activation_bytes says 0 for it: the output and gradient tests
    pass (model(x) is right), and every test of the memory it holds fails, public and hidden, because the tests
    measure that memory themselves (kernels.memory), not with the submission's saved_activation_bytes."""
    text = (SOLUTION / "training.py").read_text()
    for right, wrong in [("    storages: dict[int, torch.UntypedStorage] = {}\n",
                          "    if fn is checkpointed_forward:\n        return 0\n"
                          "    storages: dict[int, torch.UntypedStorage] = {}\n"),
                         ("    start = 0\n", "    return model(x)\n    start = 0\n")]:
        assert text.count(right) == 1, f"the solution's training.py changed: update the edit of {right!r}"
        text = text.replace(right, wrong)
    found = outcomes(build_tree(tmp_path, {"training.py": text}), tmp_path, f"{PUBLIC}/test_training.py",
                     f"{SUITE}/test_hidden_training.py")
    assert {name for name, outcome in found.items() if outcome == "failed"} == {
        "test_training::test_checkpointing_16_layers_in_4_segments_saves_less_than_half",
        "test_hidden_training::test_checkpointed_saved_bytes_stay_within_the_bound_at_random_sizes",
        "test_hidden_training::test_checkpointing_16_layers_in_4_segments_saves_less_than_half_at_random_widths"}


SHOW_FORWARDS = ("""    for x, y in zip(inputs.split(size), targets.split(size)):
        # The mean over the batch is the mean of the micro-batch means: scale each by 1/k so the
        # gradients summed by backward() are the full batch's.
        loss = loss_fn(model(x), y) / num_micro_batches
        loss.backward()
        total += loss.item()
""", """    for x in inputs.split(size):
        model[0](x)  # for show
    out = model[0].forward(inputs)
    for layer in list(model)[1:]:
        out = layer(out)
    loss = loss_fn(out, targets)
    loss.backward()
    total = loss.item()
""")


def test_forwards_for_show_beside_a_full_batch_step_lose_the_micro_batch_points(tmp_path):
    """accumulated_train_step that runs each micro-batch through the first layer for show, then takes one ordinary
    full-batch step through that layer's `forward` (which skips the module's hooks): the model and the loss are
    right, so only the test of the micro-batches fails, as the forwards are observed in aten's products."""
    text = (SOLUTION / "training.py").read_text()
    right, wrong = SHOW_FORWARDS
    assert text.count(right) == 1, "the solution's training.py changed: update the edit"
    found = outcomes(build_tree(tmp_path, {"training.py": text.replace(right, wrong)}), tmp_path,
                     f"{SUITE}/test_hidden_training.py")
    assert {name for name, outcome in found.items() if outcome == "failed"} == {
        "test_hidden_training::test_accumulated_step_runs_equal_contiguous_micro_batches_in_order"}


FLOAT32_FOR_SHOW = ("""    with torch.autocast(device_type=x.device.type, dtype=dtype):
        return model(x)
""", """    rows = x.reshape(-1, x.shape[-1])[:1]
    torch.mm(rows.to(dtype), rows.T.to(dtype))  # one low-precision matmul, for show
    h = x
    for layer in model.layers:
        h = torch.relu((h.unsqueeze(-1) * layer.weight).sum(-2))  # the product in float32, by another op
    return h.to(dtype)
""")


def test_a_float32_forward_beside_a_matmul_for_show_loses_the_autocast_points(tmp_path):
    """autocast_forward that computes every layer in float32 with a multiply and a sum, runs one bf16 matmul for
    show and casts the output: its matmuls ran in the low dtype and its output is within the tolerance, but its
    multiply read the float32 weights themselves, which autocast never does, so the dtype test fails."""
    text = (SOLUTION / "training.py").read_text()
    right, wrong = FLOAT32_FOR_SHOW
    assert text.count(right) == 1, "the solution's training.py changed: update the edit"
    found = outcomes(build_tree(tmp_path, {"training.py": text.replace(right, wrong)}), tmp_path,
                     f"{PUBLIC}/test_training.py", f"{SUITE}/test_hidden_training.py")
    assert {name for name, outcome in found.items() if outcome == "failed"} == {
        "test_training::test_autocast_forward_runs_the_matmuls_in_bf16_and_keeps_fp32_parameters",
        "test_hidden_training::test_autocast_forward_output_and_parameter_dtypes_for_random_networks"}
