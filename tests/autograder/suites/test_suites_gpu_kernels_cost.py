"""The counting, wave and measurement tests of gpu_kernels (public and hidden), tested.

The reference earns every point from the real grader, the stubs none; correct alternatives pass every
test; each plausible mistake fails the tests of the property it breaks, and hard-coding the public
answers earns no hidden point. Trees are built in tmp_path (solutions/gpu_kernels copied, then small
edits of cost.py and measure.py) and run with pytest in a subprocess (`--impl TREE`, a fixed seed, GPU
tests deselected). Mistakes in functions that no test shares are run together, one tree per group,
and the group must fail exactly the union of their tests: one run instead of one per mistake.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from tests.pytest_run import run_pytest

ROOT = Path(__file__).resolve().parents[3]
SOLUTION = ROOT / "solutions" / "gpu_kernels"
STUBS = ROOT / "assignments"
PUBLIC = ["tests/gpu_kernels/test_cost.py", "tests/gpu_kernels/test_measure.py"]
HIDDEN_COST = "autograder/suites/gpu_kernels/test_hidden_cost.py"
HIDDEN_MEASURE = "autograder/suites/gpu_kernels/test_hidden_measure.py"
SELECT = "test_cost or test_measure or test_hidden_cost or test_hidden_measure"
SEED = "20261204"


def build_tree(folder: Path, edits: dict[str, list[tuple[str, str]]]) -> Path:
    """solutions' gpu_kernels package in `folder`, with each module's (right, wrong) text replacements applied."""
    shutil.copytree(SOLUTION, folder / "gpu_kernels", ignore=shutil.ignore_patterns("__pycache__"))
    for module, replacements in edits.items():
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
    done = run_pytest(command[3:], ROOT, timeout=600)
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


def failed(found: dict[str, str]) -> set[str]:
    return {name for name, outcome in found.items() if outcome != "passed"}


# ---- Correct alternatives --------------------------------------------------------------------------

ALTERNATIVES = {
    "cost.py": [
        ("import torch\n", "import math\n\nimport torch\n"),
        # tiles by math.ceil, waves by a loop, efficiency as padding efficiency times wave efficiency
        ("return -(-m // tile_m) * -(-n // tile_n)", "return math.ceil(m / tile_m) * math.ceil(n / tile_n)"),
        ("    return -(-tiles(m, n, tile_m, tile_n) // _count(\"num_sms\", num_sms))",
         "    num_sms, remaining, rounds = _count(\"num_sms\", num_sms), tiles(m, n, tile_m, tile_n), 0\n"
         "    while remaining > 0:\n        remaining -= num_sms\n        rounds += 1\n    return rounds"),
        ("    rounds = waves(m, n, tile_m, tile_n, num_sms)\n    return m * n / (rounds * num_sms * tile_m * tile_n)",
         "    count = tiles(m, n, tile_m, tile_n)\n"
         "    return (m * n / (count * tile_m * tile_n)) * (count / (waves(m, n, tile_m, tile_n, num_sms) * num_sms))"),
        # fusion savings in closed form
        ("    size = _element_bytes(dtype)\n    _, fused",
         "    _count(\"k\", k)\n    return 4 * _count(\"m\", m) * _count(\"n\", n) * _element_bytes(dtype)\n    _, fused"),
    ],
    "measure.py": [
        # nanosecond clock, the middle of the sorted times
        ("        start = time.perf_counter()\n", "        start = time.perf_counter_ns()\n"),
        ("        times.append(time.perf_counter() - start)\n    return statistics.median(times)",
         "        times.append((time.perf_counter_ns() - start) / 1e9)\n    return sorted(times)[len(times) // 2]"),
        # self times summed over the raw events, by hand
        ("    ranked = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:k]\n"
         "    return [(str(e.key), float(e.self_cpu_time_total), int(e.count)) for e in ranked]",
         "    totals: dict = {}\n    for event in prof.events():\n"
         "        time_us, calls = totals.get(event.name, (0.0, 0))\n"
         "        totals[event.name] = (time_us + event.self_cpu_time_total, calls + 1)\n"
         "    ranked = sorted(totals.items(), key=lambda item: item[1][0], reverse=True)[:k]\n"
         "    return [(name, float(time_us), calls) for name, (time_us, calls) in ranked]"),
    ],
}


# ---- Plausible mistakes ----------------------------------------------------------------------------

# name: (module, [(text in the solution, its wrong replacement)], hidden tests it must fail)
MISTAKES = {
    "tiles rounded down": ("cost.py", [("return -(-m // tile_m) * -(-n // tile_n)", "return (m // tile_m) * (n // tile_n)")], {
        "test_tiles_at_random_sizes_including_partial_tiles", "test_waves_on_the_sm_counts_of_the_hardware_table",
        "test_waves_at_random_sizes_and_sm_counts", "test_tile_efficiency_at_random_sizes_and_sm_counts",
        "test_growing_the_output_to_fill_the_last_wave_raises_the_efficiency"}),
    "waves rounded down": ("cost.py", [("return -(-tiles(m, n, tile_m, tile_n) // _count(\"num_sms\", num_sms))",
                                        "return tiles(m, n, tile_m, tile_n) // _count(\"num_sms\", num_sms)")], {
        "test_waves_on_the_sm_counts_of_the_hardware_table", "test_waves_at_random_sizes_and_sm_counts",
        "test_tile_efficiency_at_random_sizes_and_sm_counts",
        "test_growing_the_output_to_fill_the_last_wave_raises_the_efficiency"}),
    "efficiency ignores the idle SMs of the last wave": (
        "cost.py", [("return m * n / (rounds * num_sms * tile_m * tile_n)",
                     "return m * n / (tiles(m, n, tile_m, tile_n) * tile_m * tile_n)")], {
            "test_tile_efficiency_at_random_sizes_and_sm_counts",
            "test_growing_the_output_to_fill_the_last_wave_raises_the_efficiency"}),
    "efficiency ignores the padding of partial tiles": (
        "cost.py", [("return m * n / (rounds * num_sms * tile_m * tile_n)",
                     "return tiles(m, n, tile_m, tile_n) / (rounds * num_sms)")], {
            "test_tile_efficiency_at_random_sizes_and_sm_counts",
            "test_growing_the_output_to_fill_the_last_wave_raises_the_efficiency"}),
    "matmul forgets the bias bytes": (
        "cost.py", [("elements = m * k + k * n + m * n + (n if bias else 0)", "elements = m * k + k * n + m * n")], {
            "test_matmul_cost_at_random_sizes_with_random_epilogues",
            "test_fusion_savings_are_four_passes_over_the_output_at_random_sizes"}),
    "matmul FLOPs counted in floating point": (
        "cost.py", [("flops = 2 * m * n * k + m * n", "flops = 2.0 * m * n * k + m * n")], {
            "test_matmul_cost_at_random_sizes_with_random_epilogues"}),
    "the unfused intermediate counted once, not written and read": (
        "cost.py", [("    return product + add_bias + gelu - fused", "    return 2 * m * n * size")], {
            "test_fusion_savings_are_four_passes_over_the_output_at_random_sizes"}),
    "softmax ignores the passes": (
        "cost.py", [("(passes + 1) * elements", "2 * elements")], {"test_softmax_cost_at_random_shapes_dtypes_and_passes"}),
    "elementwise counts the read only": (
        "cost.py", [("return numel * flops_per_element, 2 * numel", "return numel * flops_per_element, numel")], {
            "test_elementwise_cost_at_random_sizes_dtypes_and_flop_counts",
            "test_fusion_savings_are_four_passes_over_the_output_at_random_sizes"}),
    "benchmark without warm-up": (
        "measure.py", [("    for _ in range(warmup):\n        fn(*args)\n", "")], {
            "test_benchmark_call_counts_and_arguments_at_random_warmup_and_rep",
            "test_benchmark_gives_the_median_of_the_timed_calls_for_random_patterns"}),
    "benchmark takes the mean": (
        "measure.py", [("return statistics.median(times)", "return statistics.mean(times)")], {
            "test_benchmark_gives_the_median_of_the_timed_calls_for_random_patterns"}),
    "benchmark takes the minimum": (
        "measure.py", [("return statistics.median(times)", "return min(times)")], {
            "test_benchmark_gives_the_median_of_the_timed_calls_for_random_patterns"}),
    "benchmark times the warm-up calls too": (
        "measure.py", [("    for _ in range(warmup):\n        fn(*args)\n", ""),
                       ("for _ in range(rep):", "for _ in range(warmup + rep):")], {
            "test_benchmark_gives_the_median_of_the_timed_calls_for_random_patterns"}),
    "profile ranks by total time": (
        "measure.py", [("key=lambda e: e.self_cpu_time_total", "key=lambda e: e.cpu_time_total")], {
            "test_profile_top_ops_ranks_by_self_time_not_total_time"}),
    "profile counts one call per op": (
        "measure.py", [("int(e.count)", "1")], {"test_profile_top_ops_on_random_programs"}),
    "cost functions hard-code the public answers": (
        "cost.py", [("    return -(-m // tile_m) * -(-n // tile_n)", "    return 133 if m == 896 else (4 if m == 129 else 1)"),
                    ("    return m * n / (rounds * num_sms * tile_m * tile_n)",
                     "    return {896: 133 / 264, 1536: 1.0}.get(m, 100 * 100 / 128**2)"),
                    ("    return product + add_bias + gelu - fused", "    return {4096: 134_217_728}.get(m, 4 * 100 * 30 * 4)")], {
            "test_tiles_at_random_sizes_including_partial_tiles", "test_waves_on_the_sm_counts_of_the_hardware_table",
            "test_waves_at_random_sizes_and_sm_counts", "test_tile_efficiency_at_random_sizes_and_sm_counts",
            "test_growing_the_output_to_fill_the_last_wave_raises_the_efficiency",
            "test_fusion_savings_are_four_passes_over_the_output_at_random_sizes"}),
    "profile returns the public answer": (
        "measure.py", [("    ranked = sorted(prof.key_averages()",
                        "    return [('aten::mm', 9e3, 2), ('aten::add', 9.0, 3), ('aten::mul', 8.0, 2), ('aten::exp', 7.0, 1)]"
                        "[:k]\n    ranked = sorted(prof.key_averages()")], {
            "test_profile_top_ops_on_random_programs", "test_profile_top_ops_returns_min_of_k_and_the_ops_that_ran",
            "test_profile_top_ops_ranks_by_self_time_not_total_time",
            "test_profile_top_ops_warms_up_once_outside_the_profile"}),
    "efficiency returns an empty tensor, which any pytest.approx(x) equals": (
        "cost.py", [("    return m * n / (rounds * num_sms * tile_m * tile_n)", "    return torch.empty(0)")], {
            "test_tile_efficiency_counts_padding_and_the_idle_sms_of_the_last_wave",
            "test_tile_efficiency_at_random_sizes_and_sm_counts",
            "test_growing_the_output_to_fill_the_last_wave_raises_the_efficiency"}),
    "profile without warm-up": (
        "measure.py", [("    fn(*args)  # warm-up, outside the profile\n", "")], {
            "test_profile_top_ops_warms_up_once_outside_the_profile"}),
}

# Mistakes run together touch functions that no test of another mistake of the group exercises.
GROUPS = [
    ("tiles rounded down", "matmul FLOPs counted in floating point", "softmax ignores the passes",
     "benchmark without warm-up", "profile ranks by total time"),
    ("waves rounded down", "matmul forgets the bias bytes", "benchmark takes the mean", "profile counts one call per op"),
    ("efficiency ignores the idle SMs of the last wave", "the unfused intermediate counted once, not written and read",
     "benchmark takes the minimum", "profile returns the public answer"),
    ("efficiency ignores the padding of partial tiles", "elementwise counts the read only",
     "benchmark times the warm-up calls too", "profile without warm-up"),
    ("cost functions hard-code the public answers",),
    ("efficiency returns an empty tensor, which any pytest.approx(x) equals",),
]
# The mistakes that the public tests must catch too: their groups run tests/gpu_kernels/test_cost.py as well.
PUBLIC_TOO = {"efficiency returns an empty tensor, which any pytest.approx(x) equals"}


def mistake_edits(group: tuple[str, ...]) -> dict[str, list[tuple[str, str]]]:
    edits: dict[str, list] = {}
    for name in group:
        module, replacements, _ = MISTAKES[name]
        edits.setdefault(module, []).extend(replacements)
    return edits


@pytest.fixture(scope="module")
def runs(tmp_path_factory, warm_grade) -> dict:
    """Every run this module checks, started together (each is mostly a fresh interpreter importing torch):
    "reference" (the real grader's report), "stubs", "alternatives" and each group of mistakes (outcomes)."""
    base = tmp_path_factory.mktemp("gpu_kernels_cost")
    everything = [*PUBLIC, HIDDEN_COST, HIDDEN_MEASURE]
    jobs = {"stubs": (STUBS, everything), "alternatives": (build_tree(base / "alternatives", ALTERNATIVES), everything)}
    for index, group in enumerate(GROUPS):
        paths = [HIDDEN_COST] + ([HIDDEN_MEASURE] if any(MISTAKES[n][0] == "measure.py" for n in group) else [])
        paths += [PUBLIC[0]] if PUBLIC_TOO & set(group) else []
        jobs[group] = (build_tree(base / f"group{index}", mistake_edits(group)), paths)
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 1))) as pool:
        reference = pool.submit(warm_grade, SOLUTION.parent, assignment="gpu_kernels", select=SELECT)
        futures = {key: pool.submit(outcomes, tree, base / f"junit-{index}.xml", paths)
                   for index, (key, (tree, paths)) in enumerate(jobs.items())}
        return {"reference": reference.result(), **{key: future.result() for key, future in futures.items()}}


def test_the_reference_earns_every_point_from_the_real_grader(runs):
    """Graded by the real grader (sandboxed worker, scenarios across the boundary), the reference loses no
    point of the counting and measurement tests; only the GPU tests are "not graded" without a GPU."""
    report = runs["reference"]
    mine = [t for t in report.tests if t.task.startswith(("cost.", "measure."))]
    assert len(mine) > 50, f"the grader ran {len(mine)} of these tests: {report.log}"
    lost = [(t.name, t.status, t.message[:300]) for t in mine if t.status not in ("passed", "not_graded", "manual")]
    assert lost == []
    not_graded = {t.name.rpartition("::")[2] for t in mine if t.status == "not_graded"}
    assert not_graded == (set() if torch.cuda.is_available() else {
        "test_benchmark_waits_for_the_cuda_kernel_to_finish", "test_benchmark_synchronizes_before_reading_the_clock_on_cuda"})
    assert {t.visibility for t in mine} == {"visible", "hidden"}


def test_the_stubs_pass_no_test(runs):
    """The generated stubs fail every public and hidden test of §5 to §7."""
    assert len(runs["stubs"]) > 20 and failed(runs["stubs"]) == set(runs["stubs"])


def test_correct_alternatives_pass_every_test(runs):
    """Waves by a loop, tiles by math.ceil, the efficiency as a product of two ratios, fusion savings in
    closed form, a nanosecond clock with the sorted middle, the profiler's raw events summed by hand: every
    public and hidden test passes."""
    assert len(runs["alternatives"]) > 20 and failed(runs["alternatives"]) == set()


def test_every_mistake_is_in_one_group():
    assert sorted(name for group in GROUPS for name in group) == sorted(MISTAKES)


@pytest.mark.parametrize("group", GROUPS, ids=lambda group: " + ".join(group))
def test_mistakes_fail_the_hidden_tests_of_what_they_break(runs, group):
    """Each mistake of the group fails the hidden tests of the property it breaks, and no other test fails."""
    expected = set().union(*(MISTAKES[name][2] for name in group))
    found = failed(runs[group])
    assert found == expected, f"unexpected: {found - expected}; missed: {expected - found}"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the synchronisation tests need a CUDA device")
def test_a_benchmark_that_does_not_synchronise_fails_the_gpu_tests(tmp_path):
    """Without torch.cuda.synchronize() before reading the clock, both GPU tests of the benchmark fail."""
    tree = build_tree(tmp_path / "tree", {"measure.py": [("        _synchronize()\n        start", "        start"),
                                                         ("        _synchronize()\n        times", "        times")]})
    junit = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", PUBLIC[1], HIDDEN_MEASURE, "--impl", str(tree), "--seed", SEED,
                    "-q", "-m", "gpu", "-p", "no:cacheprovider", f"--junitxml={junit}"], cwd=ROOT, timeout=600)
    cases = {case.get("name"): [child.tag for child in case] for case in ET.parse(junit).getroot().iter("testcase")}
    assert len(cases) == 2 and all("failure" in tags for tags in cases.values()), cases
