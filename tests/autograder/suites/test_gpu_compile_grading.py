"""The hidden compile checks (autograder/suites/flash_attention/test_gpu_compile.py), tested on a CPU.

A tree is built from solutions/flash_attention with one edit, or with an alternative's modules, and
the hidden file runs against it in a pytest subprocess (fixed seed, one shared Triton cache so the
kernels every tree has in common are compiled once). The reference and a correct alternative earn
every compile point; a GPU-only dtype mistake (P fed to tl.dot in fp32) passes every CPU correctness
test yet loses the forward's compile points, with the kernel, line and fix named; tiles that overflow
an H100's shared memory lose them too.

The cheap cases run in `make test`; the full matrices (every dtype and part, the alternative, the
overflow, about two minutes of compiling cold) run in `make test-gpu-grading`, which sets
LLMSYS_GPU_GRADING_TESTS=1.
"""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.autograder.suites.test_suites_flash_attention import ROOT, SEED, alternative, build_tree
from tests.pytest_run import run_pytest

HIDDEN = "autograder/suites/flash_attention/test_gpu_compile.py"
CPU_FORWARD = ("autograder/suites/flash_attention/test_flash_triton.py::"
               "test_triton_forward_matches_float64_at_random_shapes")
FULL = os.environ.get("LLMSYS_GPU_GRADING_TESTS") == "1"
full_only = pytest.mark.skipif(not FULL, reason="the full compile-grading matrix: make test-gpu-grading")

P_NOT_CAST = ("flash_triton.py", "_dot(p.to(v.dtype), v, DOT_FP32)", "_dot(p, v, DOT_FP32)")
# 64 x 512 tiles at d 128: 272 KiB of shared memory, more than an H100 block may use (227 KiB).
HUGE_TILES = ("flash_triton.py", "gpu_default=(128, 64))", "gpu_default=(64, 512))")


@pytest.fixture(scope="module")
def triton_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("triton-cache")


def planted(tmp_path: Path, edit: tuple[str, str, str]) -> Path:
    module, old, new = edit
    text = (ROOT / "solutions" / "flash_attention" / module).read_text()
    assert text.count(old) == 1, f"the planted edit no longer matches solutions/flash_attention/{module}"
    return build_tree(tmp_path, {module: text.replace(old, new)})


def results(tree: Path, tmp_path: Path, cache: Path, *paths: str, select: str = "") -> dict[str, tuple[str, str]]:
    """{test name: (passed/failed/error/skipped, message)} of pytest on `paths` against `tree`."""
    junit = tmp_path / "junit.xml"
    command = [sys.executable, "-m", "pytest", *paths, "--impl", str(tree), "--seed", SEED, "-q", "-p",
               "no:cacheprovider", f"--junitxml={junit}"] + (["-k", select] if select else [])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRITON_CACHE_DIR": str(cache)}
    done = run_pytest(command[3:], ROOT, env, timeout=900)
    assert junit.exists(), f"pytest did not run:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        bad = [child for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[bad[0].tag] if bad else "passed"
        found[case.get("name")] = (outcome, (bad[0].get("message") or "") + (bad[0].text or "") if bad else "")
    assert found, f"no test ran:\n{done.stdout[-3000:]}"
    return found


def test_the_reference_forward_builds_for_an_h100_in_bf16(tmp_path, triton_cache):
    """The reference's forward kernel earns the bf16 compile points (the subset `make test` runs)."""
    found = results(build_tree(tmp_path, {}), tmp_path, triton_cache, HIDDEN, select="forward and bf16")
    assert found == {"test_triton_forward_kernels_build_for_the_course_gpu[bf16]": ("passed", "")}


def test_p_fed_to_tl_dot_in_fp32_passes_on_a_cpu_but_loses_the_compile_points(tmp_path, triton_cache):
    """P not cast to V's dtype: the CPU correctness test passes (the interpreter upcasts), the bf16 compile
    test fails naming the kernel, the line of the dot and the fix."""
    found = results(planted(tmp_path, P_NOT_CAST), tmp_path, triton_cache, CPU_FORWARD, HIDDEN,
                    select="test_triton_forward_matches_float64_at_random_shapes or (forward and bf16)")
    assert found["test_triton_forward_matches_float64_at_random_shapes"][0] == "passed"
    outcome, message = found["test_triton_forward_kernels_build_for_the_course_gpu[bf16]"]
    assert outcome == "failed"
    for words in ("_flash_fwd_kernel", "tl.dot operands are fp32 and bf16", "p.to(v.dtype)", "flash_triton.py:",
                  "_dot(p, v, DOT_FP32)"):
        assert words in message, f"{words!r} missing from the feedback:\n{message[:2000]}"


@full_only
def test_the_reference_earns_every_compile_point(tmp_path, triton_cache):
    found = results(build_tree(tmp_path, {}), tmp_path, triton_cache, HIDDEN)
    assert len(found) == 6 and all(outcome == "passed" for outcome, _ in found.values()), found


@full_only
def test_a_correct_alternative_with_atomics_earns_every_compile_point(tmp_path, triton_cache):
    found = results(build_tree(tmp_path, alternative("atomic_dq")), tmp_path, triton_cache, HIDDEN)
    assert len(found) == 6 and all(outcome == "passed" for outcome, _ in found.values()), found


@full_only
def test_tiles_that_overflow_shared_memory_lose_the_forward_compile_points(tmp_path, triton_cache):
    """64 x 512 default tiles at d 128: the forward needs 272 KiB of shared memory, an H100 gives 227."""
    found = results(planted(tmp_path, HUGE_TILES), tmp_path, triton_cache, HIDDEN, select="forward")
    for dtype in ("bf16", "fp16"):
        outcome, message = found[f"test_triton_forward_kernels_build_for_the_course_gpu[{dtype}]"]
        assert outcome == "failed" and "shared memory" in message and "> 227 KiB on sm_90" in message, message[:2000]
