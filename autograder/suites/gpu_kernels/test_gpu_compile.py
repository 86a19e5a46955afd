"""Hidden: the Triton kernels of gelu_triton, softmax_triton and matmul_triton build for the course GPU in
bf16 and fp16, on any machine.

On a CPU the kernels run interpreted, which accepts code a GPU compiler rejects and never meets a GPU's
limits. Here the student's functions run as on a GPU (fake CUDA tensors at the handout's build shapes:
GeLU on 4096 x 4096, softmax rows of 1000 and of 16384 columns, the matmul at 4096³ with and without a
bias and GeLU; launches recorded, not run) and each kernel launched is compiled for the course GPU with
Triton's own compiler (kernels.crosscompile; no GPU needed): it must compile, fit the architecture's
shared memory per block and launch limits (threads and registers per block), compute its pointer offsets
in int64 (handout §2) and, for the matmul, put its dots on the tensor cores. The GeLU's build is read once
more: each global load of its PTX must move 128 bits per thread (a vector of 16 contiguous bytes, handout
§2), which a strided access or a BLOCK too small for its warps does not. The matmul's build is read once more:
each tl.dot must compile to the course GPU's own tensor-core instruction (wgmma on sm_90, not Ampere's mma.sync)
and its tiles must be copied into shared memory by cp.async, ahead of the dot (a pipeline, handout §4).

A GPU also runs a grid's programs in no fixed order, the interpreter in increasing order: on a CPU each
kernel runs its programs reversed and shuffled too and must give the same output (kernels.program_order),
which catches a program that writes past its own part and is repaired by a later program.

The course GPU is sm_90 (H100, H200) unless LLMSYS_COURSE_GPU names another target (sm_80, sm_100).
The build report comes from the sandbox, so it is judged here against this process's own limits, and
its points need the same kernel to be right first: each test checks a tiny float32 case (interpreted
on a CPU) before it asks for the build, and the kernels built must be kernels that value check launched: a
GPU may change their tiles, warps, stages and grid, not which kernels run (a kernel launched only when CUDA
is there would be built and never tested).
"""

import os

import pytest
import torch

from autograder.suites.gpu_kernels import scenarios
from kernels.crosscompile import (TARGETS, narrow_load_problems, pipeline_problems, report_problems,
                                  unrun_kernel_problems)
from kernels.device import default_device
from kernels.hardware import ARCHITECTURE_GPUS, SHARED_MEMORY_PER_BLOCK, TENSOR_CORE_INSTRUCTION

pytestmark = [pytest.mark.visibility("hidden"), pytest.mark.triton]

COURSE_GPU_VARIABLE = "LLMSYS_COURSE_GPU"
DEVICE = str(default_device())


def course_target() -> str:
    target = os.environ.get(COURSE_GPU_VARIABLE, "sm_90")
    if target not in TARGETS:
        raise pytest.UsageError(f"{COURSE_GPU_VARIABLE}={target!r} is not a target; use one of {list(TARGETS)}")
    return target


def judge(answer, kernel: str, dtype: str, target: str, dots: bool) -> list[str]:
    """What stops `kernel`'s Triton kernels from running on the target, from the worker's report (plain data).
    dots: the task's kernel must have a tl.dot on the tensor cores (the matmul)."""
    where = f"{kernel} in {dtype} on {target} ({ARCHITECTURE_GPUS[target]})"
    return report_problems(answer, where, target, SHARED_MEMORY_PER_BLOCK[target],
                           "no kernel has a tl.dot on the tensor cores (handout §4)" if dots else None,
                           int64_offsets="a tensor of more than 2³¹ elements overflows them; widen the program id "
                                         "first, tl.program_id(0).to(tl.int64) (handout §2)")


def build_call(kernel: str, dtype: str) -> dict:
    """The keyword arguments of scenarios.gpu_builds for `kernel`'s build check in `dtype`."""
    return dict(kernel=kernel, dtype=dtype, target=course_target())


def assert_builds(student, kernel: str, dtype: str, launched: list[str], dots: bool = False) -> None:
    call = build_call(kernel, dtype)
    answer = student.run(scenarios.gpu_builds, **call)
    problems = judge(answer, kernel, dtype, call["target"], dots)
    problems += unrun_kernel_problems(answer, f"{kernel}_triton", launched)
    assert not problems, "\n".join(problems)


def launched_by(got) -> list[str]:
    """The names of the kernels a value scenario reports it launched (plain data from the worker)."""
    names = got.get("launches") if isinstance(got, dict) else None
    assert type(names) is list and all(type(n) is str for n in names), "the value check reported no launches"
    return names


# Which kernel each build check builds: the grader starts those builds once the tests are collected, beside
# them (autograder.grading.ahead), and a check takes its answer from there.
BUILD_CHECKS = {"test_gelu_kernel_builds_for_the_course_gpu": "gelu",
                "test_gelu_kernel_loads_128_bits_per_thread_on_the_course_gpu": "gelu",
                "test_softmax_kernels_build_for_the_course_gpu": "softmax",
                "test_matmul_kernels_build_for_the_course_gpu_with_tensor_cores": "matmul",
                "test_matmul_uses_the_course_gpus_own_tensor_cores_and_a_pipeline": "matmul"}
BUILD_SCENARIO = scenarios.gpu_builds  # what each of them asks for, in each scenarios.BUILD_DTYPES


def builds_ahead(items: list) -> list:
    """(scenario, keyword arguments) of the builds that these collected tests of this module will ask for, each
    once however many checks read it (the GeLU's build is read by two)."""
    calls = [build_call(BUILD_CHECKS[item.originalname], item.callspec.params["dtype"])
             for item in items if item.originalname in BUILD_CHECKS]
    return [(scenarios.gpu_builds, call) for i, call in enumerate(calls) if call not in calls[:i]]


@pytest.mark.points(1)
@pytest.mark.edge
@pytest.mark.task("elementwise.gelu_triton")
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_gelu_kernel_builds_for_the_course_gpu(student, trusted, rng, dtype):
    """The kernel gelu_triton launches on a GPU (4096 x 4096) compiles for the course GPU (sm_90 unless
    configured) in bf16 and fp16 and fits its shared memory; only for a GeLU right at a tiny float32 case."""
    assert_builds(student, "gelu", dtype, assert_right_gelu(student, trusted, rng))


def assert_right_gelu(student, trusted, rng) -> list[str]:
    """gelu_triton right at a tiny float32 case; the kernels it launched."""
    x = trusted.randn(rng.randrange(2**31), rng.randint(1, 30), rng.randint(1, 30), scale=3.0)
    got = student.run(scenarios.gelu, x=x, view=None, device=DEVICE)
    trusted.assert_close("gelu_triton (the build is checked only for a right GeLU)", got["out"], trusted.gelu64(x),
                         torch.float32, trusted.fp32)
    return launched_by(got)


@pytest.mark.points(0.5)
@pytest.mark.edge
@pytest.mark.task("elementwise.gelu_triton")
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_gelu_kernel_loads_128_bits_per_thread_on_the_course_gpu(student, trusted, rng, dtype):
    """In the PTX of the kernel gelu_triton launches on a GPU (4096 x 4096, bf16 and fp16, built for the course
    GPU at the launch's own BLOCK and num_warps), every global load moves 128 bits into its thread
    (ld.global.v4.b32: 8 contiguous elements), so that a warp's loads cover 512 contiguous bytes; only for a
    GeLU right at a tiny float32 case.

    Hint: give each program consecutive elements, offsets pid * BLOCK + tl.arange(0, BLOCK), not a stride
    over the programs; and give each thread at least 16 bytes, BLOCK >= 8 x 32 x num_warps in bf16/fp16
    (1024 at Triton's default 4 warps, 2048 at 8). Handout §2.
    """
    launched = assert_right_gelu(student, trusted, rng)
    call = build_call("gelu", dtype)
    answer = student.run(scenarios.gpu_builds, **call)
    where = f"gelu in {dtype} on {call['target']} ({ARCHITECTURE_GPUS[call['target']]})"
    problems = narrow_load_problems(answer, where, call["target"],
                                    "Load consecutive elements, offsets pid * BLOCK + tl.arange(0, BLOCK), and give "
                                    "each thread 16 bytes or more: BLOCK >= 8 x 32 x num_warps in bf16/fp16 "
                                    "(handout §2)") + unrun_kernel_problems(answer, "gelu_triton", launched)
    assert not problems, "\n".join(problems)


@pytest.mark.points(1)
@pytest.mark.edge
@pytest.mark.task("softmax.softmax_triton")
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_softmax_kernels_build_for_the_course_gpu(student, trusted, rng, dtype):
    """The kernels softmax_triton launches on a GPU (rows of 1000 and of 16384 columns) compile for the course
    GPU in bf16 and fp16 and fit its shared memory; only for a softmax right at a tiny float32 case."""
    x = trusted.randn(rng.randrange(2**31), rng.randint(1, 5), rng.randint(1, 80), scale=3.0)
    got = student.run(scenarios.softmax, x=x, view=None, block_size=16, device=DEVICE)
    trusted.assert_close("softmax_triton (the build is checked only for a right softmax)", got["out"],
                         trusted.softmax64(x), torch.float32, trusted.fp32)
    assert_builds(student, "softmax", dtype, launched_by(got))


@pytest.mark.points(2)
@pytest.mark.edge
@pytest.mark.task("matmul.matmul_triton")
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_matmul_kernels_build_for_the_course_gpu_with_tensor_cores(student, trusted, rng, dtype):
    """The kernels matmul_triton launches on a GPU (4096³, with a bias and GeLU and without) compile for the
    course GPU in bf16 and fp16 at the tiles, warps and stages they are launched with (the student's
    `_gpu_config`; an autotuned kernel's first config), fit its shared memory, and put tl.dot on the tensor
    cores; only for a matmul right at a tiny float32 case.

    Hint: give tl.dot the bf16/fp16 tiles as they are on a GPU (upcast to fp32 only for fp32 inputs or under
    the interpreter); write `_gpu_config` (handout §4) so that num_stages pairs of tiles fit shared memory.
    """
    assert_builds(student, "matmul", dtype, assert_right_matmul(student, trusted, rng), dots=True)


def assert_right_matmul(student, trusted, rng) -> list[str]:
    """matmul_triton right at a tiny float32 case (M, N, K from 1 to 40), plain and with a bias and GeLU (as the
    builds are asked for), before any of its builds is read; the kernels it launched."""
    m, n, k = (rng.randint(1, 40) for _ in range(3))
    a, b = trusted.randn(rng.randrange(2**31), m, k), trusted.randn(rng.randrange(2**31), k, n)
    bias = trusted.randn(rng.randrange(2**31), n)
    launched = []
    for with_bias, activation in ((None, None), (bias, "gelu")):
        got = student.run(scenarios.matmul, a=a, b=b, bias=with_bias, activation=activation, a_view=None, b_view=None,
                          device=DEVICE)
        expected = trusted.matmul64(a, b, with_bias, activation)
        trusted.assert_close(f"matmul_triton{' with a bias and GeLU' if activation else ''} (the build is checked "
                             "only for a right matmul)", got["out"], expected, torch.float32, trusted.fp32)
        launched += launched_by(got)
    return launched


@pytest.mark.points(0.5)
@pytest.mark.edge
@pytest.mark.task("matmul.matmul_triton")
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_matmul_uses_the_course_gpus_own_tensor_cores_and_a_pipeline(student, trusted, rng, dtype):
    """In the PTX of the kernels matmul_triton launches on a GPU (4096³, with a bias and GeLU and without, bf16
    and fp16, built for the course GPU at the student's own tiles, warps and stages), every tl.dot compiles to
    the course GPU's own tensor-core instruction (wgmma.mma_async on an H100, a warpgroup's asynchronous MMA;
    not Ampere's mma.sync, which a Hopper also runs at a fraction of the rate) and the tiles of A and B reach
    shared memory by asynchronous copies (cp.async), issued ahead of the tl.dot that uses them (a software
    pipeline, num_stages >= 2); only for a matmul right at a tiny float32 case.

    Hint: on an H100, Triton emits wgmma for tiles of 64 rows or more at a num_warps that is a multiple of 4
    (a warpgroup is 4 warps), and cp.async from num_stages=2 on. Handout §4, "What the H100 makes of it".
    """
    launched = assert_right_matmul(student, trusted, rng)
    call = build_call("matmul", dtype)
    answer = student.run(scenarios.gpu_builds, **call)
    where = f"matmul in {dtype} on {call['target']} ({ARCHITECTURE_GPUS[call['target']]})"
    own = TENSOR_CORE_INSTRUCTION[call["target"]]
    cores = ("Give tl.dot bf16/fp16 tiles (handout §4)" if own == "mma.sync" else
             f"On {call['target']} Triton emits {own} for BLOCK_M >= 64 at a num_warps that is a multiple of 4 "
             "(handout §4)")
    problems = pipeline_problems(answer, where, call["target"], cores,
                                 "Pipeline the K loop: num_stages >= 2 in your _gpu_config (handout §4)")
    problems += unrun_kernel_problems(answer, "matmul_triton", launched)
    assert not problems, "\n".join(problems)


def order_inputs(trusted, rng, kernel: str) -> dict:
    """Tiny float32 inputs that give each reference kernel several programs: GeLU on 1100 to 3000 elements,
    softmax rows of an odd length (its default block is wider than the row), a matmul of 2 or 3 tiles a side."""
    seed = rng.randrange(2**31)
    if kernel == "gelu":
        return {"x": trusted.randn(seed, rng.randint(1100, 3000))}
    if kernel == "softmax":
        return {"x": trusted.randn(seed, rng.randint(3, 8), 2 * rng.randint(9, 30) + 1, scale=3.0)}
    m, n, k = rng.randint(33, 80), rng.randint(33, 80), rng.randint(20, 50)
    return {"a": trusted.randn(seed, m, k, scale=k ** -0.5), "b": trusted.randn(seed + 1, k, n),
            "bias": trusted.randn(seed + 2, n)}


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.parametrize("kernel", [pytest.param("gelu", marks=pytest.mark.task("elementwise.gelu_triton")),
                                    pytest.param("softmax", marks=pytest.mark.task("softmax.softmax_triton")),
                                    pytest.param("matmul", marks=pytest.mark.task("matmul.matmul_triton"))])
def test_kernels_give_the_same_output_in_any_program_order(student, trusted, rng, kernel):
    """The output of gelu_triton, softmax_triton (default block and blocks of 16) and matmul_triton (a bias
    and GeLU) at a tiny float32 case does not change when the kernel's programs run reversed or shuffled,
    as a GPU may run them: no program writes another program's part. Checked under the interpreter,
    which chooses the order (on a CPU; the grader does so on a GPU machine too, in a worker without the GPU).

    Hint: mask each store to the program's own part (a softmax row's last block against the row's end,
    not the tensor's).
    """
    problems = student.run(scenarios.program_order, kernel=kernel, inputs=order_inputs(trusted, rng, kernel),
                           device=DEVICE)
    if problems is None:
        pytest.skip("programs run in the hardware's order on a GPU: checked under the interpreter (the grader does)")
    assert type(problems) is list, f"the program-order check returned {type(problems).__name__}, not a list"
    assert not problems, "\n".join(map(str, problems))
