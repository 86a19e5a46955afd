"""The hidden compile checks of gpu_kernels (autograder/suites/gpu_kernels/test_gpu_compile.py), tested on a CPU.

As for flash_attention (tests/autograder/suites/test_gpu_compile_grading.py, whose helpers run the hidden file
in a pytest subprocess against a tree, with one shared Triton cache): the reference earns the compile
points; a matmul that feeds tl.dot fp32 tiles on a GPU too (right on a CPU, where the interpreter needs
fp32) compiles, but without tensor cores, and loses the matmul's compile points with that said.

The matmul's tiles, warps and stages on a GPU are the student's (`_gpu_config`, handout §4), built as a GPU
launch would run them: the stub (not written yet) loses exactly the matmul's compile points and says so,
stages that overflow shared memory lose them naming the overflow, and another sound choice keeps them. A config
that builds and fits but not for the H100's own instructions (32-row tiles or 2 warps give Ampere's mma.sync, one
stage gives no cp.async) loses exactly the points of the check that reads wgmma and cp.async, naming what it found.

GeLU's build is read for its loads too (each global load of the PTX 128 bits per thread): a strided GeLU and a
BLOCK that gives each thread under 16 bytes at its own num_warps, both right on a CPU, lose exactly the load
points, naming the widths found; other sound launches and programs (wider blocks, more warps with a wider
block, a loop over blocks, only the last block masked) keep them.

The cheap cases run in `make test`; the full matrix (every kernel and dtype, the reference and an
alternative) in `make test-gpu-grading` (LLMSYS_GPU_GRADING_TESTS=1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.autograder.suites.test_gpu_compile_grading import full_only, results
from tests.autograder.suites.test_suites_gpu_kernels import ALTERNATIVES, SOLUTION, STUBS, build_tree, folder

HIDDEN = "autograder/suites/gpu_kernels/test_gpu_compile.py"
CPU_MATMUL = "autograder/suites/gpu_kernels/test_hidden_kernels.py::test_matmul_matches_float64_at_random_shapes"
ALWAYS_FP32 = ("matmul.py", "DOT_FP32=interpreted() or a.dtype == torch.float32", "DOT_FP32=True")
HOPPER = {f"test_matmul_uses_the_course_gpus_own_tensor_cores_and_a_pipeline[{dtype}]" for dtype in ("bf16", "fp16")}
MATMUL_BUILDS = {f"test_matmul_kernels_build_for_the_course_gpu_with_tensor_cores[{dtype}]"
                 for dtype in ("bf16", "fp16")} | HOPPER
REFERENCE_GPU_CONFIG = "return dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)"
# Four stages of 256 x 256 x 128 bf16 tiles: 4 x 128 KiB in the model of §4, far over 227 KiB (and 163 KiB).
OVERFLOWING_STAGES = ("matmul.py", REFERENCE_GPU_CONFIG,
                      "return dict(BLOCK_M=256, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=4)")
# Configs that build and fit, but not for Hopper's own instructions (handout §4, "What the H100 makes of it"):
# 32-row tiles, too short for a warpgroup's 64 (mma.sync, Ampere's instruction); 2 warps, not a warpgroup
# (mma.sync); one stage, no copy ahead of the dot (no cp.async). (config, words of the feedback)
NOT_HOPPERS_OWN = {
    "32-row-tiles": ("return dict(BLOCK_M=32, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=3)",
                     ("compiles to mma.sync", "not wgmma", "BLOCK_M >= 64")),
    "2-warps": ("return dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=2, num_stages=3)",
                ("compiles to mma.sync", "not wgmma", "multiple of 4")),
    "1-stage": ("return dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=1)",
                ("no cp.async", "num_stages >= 2", "1 stages")),
}
# Another sound choice: 64 x 128 x 32 tiles, 4 warps (64 accumulator values per thread), 3 stages of 12 KiB.
OTHER_SOUND_CHOICE = ("matmul.py", REFERENCE_GPU_CONFIG,
                      "return dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=3)")


# GeLU's launch and its program in the reference, and edits of them: each keeps GeLU right on a CPU.
GELU_LAUNCH = "_gelu_tanh_kernel[(triton.cdiv(n, BLOCK),)](dense, y, n, BLOCK=BLOCK)"
GELU_PROGRAM = """\
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # int64: tensors past 2³¹ elements
    mask = offsets < n
    x = tl.load(X + offsets, mask=mask).to(tl.float32)
    tl.store(Y + offsets, gelu_tanh(x).to(Y.dtype.element_ty), mask=mask)
"""
STRIDED_PROGRAM = """\
    offsets = tl.program_id(0).to(tl.int64) + tl.arange(0, BLOCK).to(tl.int64) * tl.num_programs(0)
    mask = offsets < n
    x = tl.load(X + offsets, mask=mask).to(tl.float32)
    tl.store(Y + offsets, gelu_tanh(x).to(Y.dtype.element_ty), mask=mask)
"""
FOUR_BLOCKS_PROGRAM = """\
    start = tl.program_id(0).to(tl.int64) * (4 * BLOCK)
    for i in range(4):
        offsets = start + i * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(X + offsets, mask=mask).to(tl.float32)
        tl.store(Y + offsets, gelu_tanh(x).to(Y.dtype.element_ty), mask=mask)
"""
MASKED_TAIL_PROGRAM = """\
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offsets = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:
        x = tl.load(X + offsets).to(tl.float32)
        tl.store(Y + offsets, gelu_tanh(x).to(Y.dtype.element_ty))
    else:
        mask = offsets < n
        x = tl.load(X + offsets, mask=mask).to(tl.float32)
        tl.store(Y + offsets, gelu_tanh(x).to(Y.dtype.element_ty), mask=mask)
"""


def gelu_block(block: int) -> tuple[str, str, str]:
    return "elementwise.py", "BLOCK = 1024  #", f"BLOCK = {block}  #"


def gelu_warps(warps: int) -> tuple[str, str, str]:
    return "elementwise.py", GELU_LAUNCH, GELU_LAUNCH.replace("BLOCK=BLOCK)", f"BLOCK=BLOCK, num_warps={warps})")


# Mistakes, with the widths their loads have: each program takes every P-th element (P programs); a thread
# holds fewer than 16 bytes in bf16/fp16 (4 elements).
NARROW_GELU_LOADS = {
    "strided": ([("elementwise.py", GELU_PROGRAM, STRIDED_PROGRAM)], "8 loads of 16 bits"),
    "1024-at-8-warps": ([gelu_warps(8)], "at BLOCK=1024, 8 warps, 3 stages: 1 load of 64 bits"),
    "512-at-4-warps": ([gelu_block(512)], "at BLOCK=512, 4 warps, 3 stages: 1 load of 64 bits"),
}
# Sound: 8 contiguous elements per thread at 8 warps; 32 at 4 warps; four blocks per program in a loop (a grid
# of a quarter as many programs); full blocks loaded unmasked and only the last one masked.
WIDE_GELU_LOADS = {
    "2048-at-8-warps": [gelu_block(2048), gelu_warps(8)],
    "4096-at-4-warps": [gelu_block(4096)],
    "four-blocks-per-program": [("elementwise.py", GELU_PROGRAM, FOUR_BLOCKS_PROGRAM),
                                ("elementwise.py", "cdiv(n, BLOCK)", "cdiv(n, 4 * BLOCK)")],
    "masked-tail-only": [("elementwise.py", GELU_PROGRAM, MASKED_TAIL_PROGRAM)],
}
CPU_GELU = ("autograder/suites/gpu_kernels/test_hidden_kernels.py::"
            "test_gelu_matches_float64_at_random_shapes_and_strides")
GELU_CHECKS = "gelu_kernel or test_gelu_matches_float64_at_random_shapes_and_strides"
GELU_LOADS = {f"test_gelu_kernel_loads_128_bits_per_thread_on_the_course_gpu[{dtype}]" for dtype in ("bf16", "fp16")}
GELU_BUILDS = {f"test_gelu_kernel_builds_for_the_course_gpu[{dtype}]" for dtype in ("bf16", "fp16")}


@pytest.fixture(scope="module")
def triton_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("triton-cache")


def planted(tmp_path: Path, *edits: tuple[str, str, str]) -> Path:
    texts: dict[str, str] = {}
    for module, old, new in edits:
        text = texts.get(module) or (SOLUTION / module).read_text()
        assert text.count(old) == 1, f"the planted edit no longer matches solutions/gpu_kernels/{module}"
        texts[module] = text.replace(old, new)
    return build_tree(tmp_path, texts)


def gpu_config_stubbed(tmp_path: Path) -> Path:
    """The reference with `_gpu_config` as the students get it (assignments/, generated): not implemented yet."""
    def function(text: str) -> str:
        start = text.index("def _gpu_config(")
        return text[start:text.index("\n\n\n", start)]

    text, stub = (SOLUTION / "matmul.py").read_text(), function((STUBS / "matmul.py").read_text())
    assert "raise NotImplementedError(" in stub, "assignments/gpu_kernels/matmul.py's _gpu_config is no longer a stub"
    return build_tree(tmp_path, {"matmul.py": text.replace(function(text), stub)})


def test_the_reference_matmul_builds_for_an_h100_in_bf16_with_tensor_cores(tmp_path, triton_cache):
    """The reference's matmul kernels earn the bf16 compile points (the subset `make test` runs): they build,
    and on the H100 every tl.dot is a wgmma and the tiles come by cp.async."""
    found = results(build_tree(tmp_path, {}), tmp_path, triton_cache, HIDDEN, select="matmul and bf16")
    assert found == {"test_matmul_kernels_build_for_the_course_gpu_with_tensor_cores[bf16]": ("passed", ""),
                     "test_matmul_uses_the_course_gpus_own_tensor_cores_and_a_pipeline[bf16]": ("passed", "")}


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


def test_a_gpu_config_not_written_yet_loses_exactly_the_matmul_compile_points(tmp_path, triton_cache):
    """The reference with the stub of `_gpu_config`: every CPU test passes (the interpreter's tiles are given),
    the build check runs matmul_triton as on a GPU, which asks `_gpu_config`: both matmul build tests fail
    saying that it is not implemented yet, and every other compile and program-order test passes."""
    found = results(gpu_config_stubbed(tmp_path), tmp_path, triton_cache, CPU_MATMUL, HIDDEN)
    assert found.pop("test_matmul_matches_float64_at_random_shapes")[0] == "passed"
    assert len(found) == 13 and {name for name, (outcome, _) in found.items() if outcome != "passed"} == MATMUL_BUILDS
    for name in MATMUL_BUILDS:
        message = found[name][1]
        for words in ("matmul_triton failed when run as on a GPU", "NotImplementedError",
                      "_gpu_config in gpu_kernels/matmul.py is not implemented yet"):
            assert words in message, f"{words!r} missing from the feedback:\n{message[:2000]}"


@pytest.mark.parametrize("target, limit", [("sm_90", 227), pytest.param("sm_80", 163, marks=full_only)])
def test_stages_that_overflow_shared_memory_lose_the_matmul_compile_points(tmp_path, triton_cache, monkeypatch,
                                                                          target, limit):
    """256 x 256 x 128 tiles at 4 stages: the build, at the student's own warps and stages, needs more shared
    memory than the course GPU's block may use; the matmul's compile test fails naming the overflow and the
    config it was built at."""
    monkeypatch.setenv("LLMSYS_COURSE_GPU", target)
    found = results(planted(tmp_path, OVERFLOWING_STAGES), tmp_path, triton_cache, HIDDEN, select="matmul and bf16")
    outcome, message = found["test_matmul_kernels_build_for_the_course_gpu_with_tensor_cores[bf16]"]
    assert outcome == "failed", found
    for words in ("_matmul_kernel", "shared memory", f"KiB > {limit} KiB on {target}",
                  "BLOCK_M=256, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, 8 warps, 4 stages", "fewer stages"):
        assert words in message, f"{words!r} missing from the feedback:\n{message[:2000]}"


@pytest.mark.parametrize("name", [name if name != "2-warps" else pytest.param(name, marks=full_only)
                                  for name in NOT_HOPPERS_OWN])
def test_a_config_short_of_hoppers_own_instructions_loses_exactly_their_points(tmp_path, triton_cache, name):
    """A config that builds and fits, but whose build uses Ampere's mma.sync on the H100 (tiles of 32 rows, 2 warps)
    or copies nothing ahead of the dot (1 stage): the matmul still builds with tensor cores (its build check
    passes); the check that reads wgmma and cp.async fails, naming what it found, the config and what to change."""
    config, words = NOT_HOPPERS_OWN[name]
    found = results(planted(tmp_path, ("matmul.py", REFERENCE_GPU_CONFIG, config)), tmp_path, triton_cache, HIDDEN,
                    select="matmul and bf16")
    assert found.pop("test_matmul_kernels_build_for_the_course_gpu_with_tensor_cores[bf16]") == ("passed", ""), found
    (test, (outcome, message)), = found.items()
    assert test in HOPPER and outcome == "failed", found
    for word in ("_matmul_kernel", "on sm_90", *words):
        assert word in message, f"{word!r} missing from the feedback:\n{message[:2000]}"


@full_only
def test_another_sound_gpu_config_earns_the_matmul_compile_points(tmp_path, triton_cache):
    """64 x 128 x 32 tiles, 4 warps, 3 stages: not the reference's, within every bound of §4; both matmul builds
    pass on the course GPU."""
    found = results(planted(tmp_path, OTHER_SOUND_CHOICE), tmp_path, triton_cache, HIDDEN, select="matmul")
    assert {name: outcome for name, (outcome, _) in found.items() if name in MATMUL_BUILDS} == dict.fromkeys(
        MATMUL_BUILDS, "passed"), found


@full_only
def test_the_reference_earns_every_compile_point(tmp_path, triton_cache):
    found = results(build_tree(tmp_path, {}), tmp_path, triton_cache, HIDDEN)
    assert len(found) == 13 and all(outcome == "passed" for outcome, _ in found.values()), found


@full_only
@pytest.mark.parametrize("name", ["row_major_matmul", "three_pass_softmax", "sigmoid_gelu"])
def test_a_kernel_that_builds_earns_every_compile_point_whatever_its_design(tmp_path, triton_cache, name):
    """The compile checks judge the build alone: sigmoid GeLU (a correct alternative) and the row-major matmul
    and three-pass softmax (design mistakes, which lose their design points in test_suites_gpu_kernels.py)
    build for the GPU as the reference does."""
    found = results(build_tree(tmp_path, folder(ALTERNATIVES / name)), tmp_path, triton_cache, HIDDEN)
    assert len(found) == 13 and all(outcome == "passed" for outcome, _ in found.values()), found


@pytest.mark.parametrize("name", ["strided", "1024-at-8-warps", pytest.param("512-at-4-warps", marks=full_only)])
def test_a_gelu_whose_threads_load_under_16_bytes_loses_only_the_load_points(tmp_path, triton_cache, name):
    """A strided GeLU (eight 16-bit loads per thread), BLOCK 1024 at 8 warps and BLOCK 512 at 4 (one 64-bit load):
    right on a CPU at random shapes, and built for the course GPU; both load checks fail naming the widths their
    PTX has, the config and what to do."""
    edits, widths = NARROW_GELU_LOADS[name]
    found = results(planted(tmp_path, *edits), tmp_path, triton_cache, CPU_GELU, HIDDEN, select=GELU_CHECKS)
    assert {n: outcome for n, (outcome, _) in found.items()} == {
        "test_gelu_matches_float64_at_random_shapes_and_strides": "passed", **dict.fromkeys(GELU_BUILDS, "passed"),
        **dict.fromkeys(GELU_LOADS, "failed")}, found
    for test in GELU_LOADS:
        message = found[test][1]
        for words in ("_gelu_tanh_kernel", widths, "each should be 128 bits (ld.global.v4.b32, 16 bytes)",
                      "pid * BLOCK + tl.arange(0, BLOCK)", "BLOCK >= 8 x 32 x num_warps"):
            assert words in message, f"{words!r} missing from the feedback:\n{message[:2000]}"


@pytest.mark.parametrize("name", ["2048-at-8-warps", *(pytest.param(name, marks=full_only) for name in (
    "4096-at-4-warps", "four-blocks-per-program", "masked-tail-only"))])
def test_a_gelu_that_gives_each_thread_16_contiguous_bytes_earns_the_load_points(tmp_path, triton_cache, name):
    """Other sound launches and programs than the reference's: BLOCK 2048 at 8 warps, 4096 at 4, a loop over four
    blocks per program, only the last block masked; right on a CPU, every GeLU build and load check passes."""
    found = results(planted(tmp_path, *WIDE_GELU_LOADS[name]), tmp_path, triton_cache, CPU_GELU, HIDDEN,
                    select=GELU_CHECKS)
    assert {n: outcome for n, (outcome, _) in found.items()} == {
        "test_gelu_matches_float64_at_random_shapes_and_strides": "passed",
        **dict.fromkeys(GELU_BUILDS | GELU_LOADS, "passed")}, found


# A GeLU whose own kernel would lose the build points (int32 offsets), beside a decoy that a GPU alone launches: a
# plain copy with int64 offsets, which builds cleanly but computes no GeLU and never runs in a value test.
DECOY_KERNEL = """

@triton.jit
def _copy_on_a_gpu(X, Y, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offsets, tl.load(X + offsets, mask=offsets < n), mask=offsets < n)


def gelu_triton("""
GPU_ONLY_DECOY = [
    ("elementwise.py", "tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # int64",
     "tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # int32"),
    ("elementwise.py", "\n\ndef gelu_triton(", DECOY_KERNEL),
    ("elementwise.py", "        " + GELU_LAUNCH,
     "        if torch.cuda.is_available():\n"
     "            _copy_on_a_gpu[(triton.cdiv(n, BLOCK),)](dense, y, n, BLOCK=BLOCK)\n"
     "        else:\n"
     "            " + GELU_LAUNCH),
]


def test_a_kernel_that_only_a_gpu_launches_earns_no_build_point(tmp_path, triton_cache):
    """The GeLU right on a CPU, whose kernel has int32 offsets, launches a decoy instead when CUDA is there: the
    decoy builds cleanly, but the build check fails, naming the decoy as a kernel the value check never ran."""
    found = results(planted(tmp_path, *GPU_ONLY_DECOY), tmp_path, triton_cache, CPU_GELU, HIDDEN,
                    select="test_gelu_matches_float64_at_random_shapes_and_strides or (gelu_kernel_builds and bf16)")
    assert found["test_gelu_matches_float64_at_random_shapes_and_strides"][0] == "passed"
    outcome, message = found["test_gelu_kernel_builds_for_the_course_gpu[bf16]"]
    assert outcome == "failed", found
    for words in ("gelu_triton launches _copy_on_a_gpu as on a GPU", "did not launch for the value check",
                  "it launched _gelu_tanh_kernel"):
        assert words in message, f"{words!r} missing from the feedback:\n{message[:2000]}"
