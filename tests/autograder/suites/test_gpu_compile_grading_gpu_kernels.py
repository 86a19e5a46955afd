"""The hidden compile checks of gpu_kernels (autograder/suites/gpu_kernels/test_gpu_compile.py), tested on a CPU.

As for flash_attention (tests/autograder/suites/test_gpu_compile_grading.py, whose helpers run the hidden file
in a pytest subprocess against a tree, with one shared Triton cache): the reference earns the compile
points; a matmul that feeds tl.dot fp32 tiles on a GPU too (right on a CPU, where the interpreter needs
fp32) compiles, but without tensor cores, and loses the matmul's compile points with that said.

The cheap cases run in `make test`; the full matrix (every kernel and dtype, the reference and an
alternative) in `make test-gpu-grading` (LLMSYS_GPU_GRADING_TESTS=1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.autograder.suites.test_gpu_compile_grading import full_only, results
from tests.autograder.suites.test_suites_gpu_kernels import ALTERNATIVES, SOLUTION, build_tree, folder

HIDDEN = "autograder/suites/gpu_kernels/test_gpu_compile.py"
CPU_MATMUL = "autograder/suites/gpu_kernels/test_hidden_kernels.py::test_matmul_matches_float64_at_random_shapes"
ALWAYS_FP32 = ("matmul.py", "DOT_FP32=interpreted() or a.dtype == torch.float32", "DOT_FP32=True")


@pytest.fixture(scope="module")
def triton_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("triton-cache")


def planted(tmp_path: Path, edit: tuple[str, str, str]) -> Path:
    module, old, new = edit
    text = (SOLUTION / module).read_text()
    assert text.count(old) == 1, f"the planted edit no longer matches solutions/gpu_kernels/{module}"
    return build_tree(tmp_path, {module: text.replace(old, new)})


def test_the_reference_matmul_builds_for_an_h100_in_bf16_with_tensor_cores(tmp_path, triton_cache):
    """The reference's matmul kernels earn the bf16 compile points (the subset `make test` runs)."""
    found = results(build_tree(tmp_path, {}), tmp_path, triton_cache, HIDDEN, select="matmul and bf16")
    assert found == {"test_matmul_kernels_build_for_the_course_gpu_with_tensor_cores[bf16]": ("passed", "")}


def test_an_fp32_dot_on_the_gpu_passes_on_a_cpu_but_loses_the_matmul_compile_points(tmp_path, triton_cache):
    """tl.dot given fp32 tiles (input_precision="ieee") for bf16 inputs too: the CPU test passes, the bf16
    compile test fails saying that the dot has no tensor-core instructions and what to do."""
    found = results(planted(tmp_path, ALWAYS_FP32), tmp_path, triton_cache, CPU_MATMUL, HIDDEN,
                    select="test_matmul_matches_float64_at_random_shapes or (matmul and bf16)")
    assert found["test_matmul_matches_float64_at_random_shapes"][0] == "passed"
    outcome, message = found["test_matmul_kernels_build_for_the_course_gpu_with_tensor_cores[bf16]"]
    assert outcome == "failed"
    for words in ("_matmul_kernel", "without tensor-core instructions", "bf16/fp16 operands"):
        assert words in message, f"{words!r} missing from the feedback:\n{message[:2000]}"


@full_only
def test_the_reference_earns_every_compile_point(tmp_path, triton_cache):
    found = results(build_tree(tmp_path, {}), tmp_path, triton_cache, HIDDEN)
    assert len(found) == 9 and all(outcome == "passed" for outcome, _ in found.values()), found


@full_only
@pytest.mark.parametrize("name", ["row_major_matmul", "three_pass_softmax", "sigmoid_gelu"])
def test_a_kernel_that_builds_earns_every_compile_point_whatever_its_design(tmp_path, triton_cache, name):
    """The compile checks judge the build alone: sigmoid GeLU (a correct alternative) and the row-major matmul
    and three-pass softmax (design mistakes, which lose their design points in test_suites_gpu_kernels.py)
    build for the GPU as the reference does."""
    found = results(build_tree(tmp_path, folder(ALTERNATIVES / name)), tmp_path, triton_cache, HIDDEN)
    assert len(found) == 9 and all(outcome == "passed" for outcome, _ in found.values()), found
