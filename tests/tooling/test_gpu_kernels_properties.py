"""The design properties of gpu_kernels' handout (§2 to §4), tested: each has a hidden test, and a planted
mistake that keeps every value right loses exactly that test.

Trees are built in tmp_path (solutions/gpu_kernels copied, then small text edits of one module each) and the
hidden kernel tests run against them with pytest in a subprocess (`--impl TREE`, a fixed seed, GPU tests
deselected): the design tests, and the empty-input test of test_hidden_kernels.py. Mistakes in different
properties share a tree, and the tree must fail exactly the union of their tests: one run instead of one
per mistake. The tolerances and error-message checks the tests rely on are tested here too, in process.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from tests.gpu_kernels.conftest import HALF, SOFTMAX_HALF, assert_close
from tests.pytest_run import run_pytest

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "gpu_kernels"
SUITE = "autograder/suites/gpu_kernels"
DESIGN = f"{SUITE}/test_hidden_kernels_design.py"
K_ZERO = f"{SUITE}/test_hidden_kernels.py::test_matmul_with_k_zero_is_the_epilogue_of_zero"
SEED = "20261204"

pytestmark = pytest.mark.triton

# ---- Planted mistakes: (module, [(text in the solution, its wrong replacement), ...]) ---------------------

THREE_PASS_SOFTMAX = ("softmax.py", [(
    "            m_new = tl.maximum(m, tl.max(x, 0))  # every block has a column < n_cols: m_new is finite\n"
    "            l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)\n"
    "            m = m_new\n",
    "            m = tl.maximum(m, tl.max(x, 0))\n"
    "        for start in range(0, n_cols, BLOCK):\n"
    "            mask = start + cols < n_cols\n"
    "            x = tl.load(x_row + (start + cols) * stride_xc, mask=mask, other=float(\"-inf\")).to(tl.float32)\n"
    "            l += tl.sum(tl.exp(x - m), 0)\n")])
TWO_PROGRAMS_PER_ROW = ("softmax.py", [
    ("    row = tl.program_id(0).to(tl.int64)\n", "    row = tl.program_id(0).to(tl.int64) // 2\n"),
    ("_softmax_kernel[(rows.shape[0],)]", "_softmax_kernel[(2 * rows.shape[0],)]")])
INT32_OFFSETS = ("elementwise.py", [("offsets = tl.program_id(0).to(tl.int64) * BLOCK",
                                     "offsets = tl.program_id(0) * BLOCK")])
ROW_MAJOR_TILES = ("matmul.py", [(
    "    per_group = GROUP_M * tiles_n\n"
    "    first_m = (pid // per_group) * GROUP_M\n"
    "    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)\n"
    "    tile_m = first_m + (pid % per_group) % rows_in_group\n"
    "    tile_n = (pid % per_group) // rows_in_group\n",
    "    tile_m = pid // tiles_n\n"
    "    tile_n = pid % tiles_n\n")])
BIAS_IN_THE_K_LOOP = ("matmul.py", [
    ("        a_ptrs += BLOCK_K * stride_ak\n",
     "        if HAS_BIAS:\n"
     "            bias = tl.load(BIAS + cols, mask=cols < N, other=0.0).to(tl.float32)\n"
     "        a_ptrs += BLOCK_K * stride_ak\n"),
    ("        acc += tl.load(BIAS + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]\n",
     "        acc += bias[None, :]\n")])
GELU_WRITTEN_AGAIN = ("matmul.py", [(
    "        acc = gelu_tanh(acc)\n",
    "        inner = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)\n"
    "        e = tl.exp(-2.0 * tl.abs(inner))\n"
    "        acc = 0.5 * acc * (1.0 + tl.where(inner < 0, -1.0, 1.0) * (1.0 - e) / (1.0 + e))\n")])
GELU_REJECTS_EMPTY = ("elementwise.py", [("    dense = x.contiguous()", "    if x.numel() == 0:\n"
                                          "        raise ValueError(\"x is empty\")\n    dense = x.contiguous()")])
SOFTMAX_RESHAPES_EMPTY_ROWS = ("softmax.py", [("    if y.numel() == 0:\n        return y\n", "")])
MATMUL_REJECTS_N_ZERO = ("matmul.py", [("    if M == 0 or N == 0:\n        return c\n",
                                        "    if N == 0:\n        raise ValueError(\"b has no columns\")\n"
                                        "    if M == 0:\n        return c\n")])

# tree: (its mistakes, the hidden tests it must fail, and no other)
TREES = {
    "passes-grouping-offsets": ([THREE_PASS_SOFTMAX, ROW_MAJOR_TILES, INT32_OFFSETS],
                                {"test_softmax_reads_each_element_once_per_pass",
                                 "test_matmul_tile_of_follows_the_grouped_order",
                                 "test_gelu_offsets_do_not_overflow_int32"}),
    # a bias loaded inside the K loop is never loaded when K = 0: that test fails too
    "programs-bias-epilogue": ([TWO_PROGRAMS_PER_ROW, BIAS_IN_THE_K_LOOP, GELU_WRITTEN_AGAIN],
                               {"test_softmax_runs_one_program_per_row", "test_matmul_loads_the_bias_once_per_program",
                                "test_matmul_epilogue_calls_gelu_tanh",
                                "test_matmul_with_k_zero_is_the_epilogue_of_zero"}),
    "empty-inputs": ([GELU_REJECTS_EMPTY, SOFTMAX_RESHAPES_EMPTY_ROWS, MATMUL_REJECTS_N_ZERO],
                     {"test_gelu_of_an_empty_tensor_is_empty", "test_softmax_of_empty_tensors_is_empty",
                      "test_matmul_with_k_zero_is_the_epilogue_of_zero"}),
}


def build_tree(folder: Path, mistakes: list) -> Path:
    """solutions' gpu_kernels package in `folder`, each mistake's (right, wrong) replacements applied."""
    shutil.copytree(SOLUTION, folder / "gpu_kernels", ignore=shutil.ignore_patterns("__pycache__"))
    for module, replacements in mistakes:
        path = folder / "gpu_kernels" / module
        text = path.read_text()
        for right, wrong in replacements:
            assert text.count(right) == 1, f"the solution's {module} changed: update the edit of {right!r}"
            text = text.replace(right, wrong)
        path.write_text(text)
    return folder


def outcomes(tree: Path, junit: Path, paths: list[str]) -> dict[str, str]:
    """Run pytest on `paths` against `tree` in a subprocess: {test name: passed, failed, error or skipped};
    a parametrized test counts as failed when any of its cases fails."""
    command = [sys.executable, "-m", "pytest", *paths, "--impl", str(tree), "--seed", SEED, "-q", "-m", "not gpu",
               "-p", "no:cacheprovider", f"--junitxml={junit}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = run_pytest(command[3:], ROOT, env, timeout=600)
    assert junit.exists(), f"pytest did not run:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    found: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(kinds[0] if kinds else "", "passed")
        name = case.get("name").partition("[")[0]
        if found.get(name, "passed") == "passed":
            found[name] = outcome
    assert found, f"no test ran:\n{done.stdout[-3000:]}"
    return found


@pytest.fixture(scope="module")
def tree_outcomes(tmp_path_factory) -> dict[str, dict[str, str]]:
    """Each tree's outcomes (and the reference's), run two at a time."""
    def run(name: str) -> tuple[str, dict[str, str]]:
        folder = tmp_path_factory.mktemp(name)
        tree = build_tree(folder / "tree", TREES[name][0] if name in TREES else [])
        return name, outcomes(tree, folder / "junit.xml", [DESIGN, K_ZERO])

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(run, ["reference", *TREES]))


def test_the_reference_passes_every_design_test(tree_outcomes):
    """The reference passes every design test (and the K = 0 test)."""
    found = tree_outcomes["reference"]
    assert {n for n, outcome in found.items() if outcome != "passed"} == set(), found
    assert {n for n in found if n.startswith("test_")} >= set().union(*(tests for _, tests in TREES.values()))


@pytest.mark.parametrize("tree", list(TREES))
def test_each_planted_mistake_loses_exactly_its_property(tree_outcomes, tree):
    """A tree of mistakes that keep every value right (or break only empty inputs) fails exactly the tests of
    the properties they break: none of the tests of values notices them."""
    found = tree_outcomes[tree]
    failed = {n for n, outcome in found.items() if outcome != "passed"}
    assert failed == TREES[tree][1], f"{tree}: failed {sorted(failed)}, expected {sorted(TREES[tree][1])}"


# ---- The checks the tests rely on ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_half_precision_softmax_tolerance_checks_the_small_probabilities(dtype):
    """A softmax that flushes every probability below 1e-3 to zero passes an atol of HALF's (2e-2 / 1e-2) but
    fails SOFTMAX_HALF's relative tolerance; the correctly rounded softmax passes it."""
    x = torch.randn(3, 10000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 4
    x = x.to(dtype)
    expected = torch.softmax(x.double(), dim=-1)
    rounded = expected.to(dtype)
    flushed = torch.where(expected < 1e-3, 0.0, expected).to(dtype)
    assert_close("softmax", rounded, expected, dtype, SOFTMAX_HALF[dtype])
    assert_close("softmax", flushed, expected, dtype, HALF[dtype])
    with pytest.raises(AssertionError, match="elements differ"):
        assert_close("softmax", flushed, expected, dtype, SOFTMAX_HALF[dtype])


@pytest.mark.parametrize("name, message", [("n", "size must be an int >= 1, got 0"),
                                           ("k", "a bad size for the kernel's inner dim: got -4"),
                                           ("m", "dtype must be a torch floating-point dtype")])
def test_an_argument_is_named_as_a_word_not_a_letter_of_one(name, message):
    """The rejection tests look for the argument's name as a word (`\\bname\\b`): a message that never names
    it, though it holds the letter, does not pass."""
    assert name in message and not re.search(rf"\b{name}\b", message)
    assert re.search(rf"\b{name}\b", f"{name} must be an int >= 1, got 0")
