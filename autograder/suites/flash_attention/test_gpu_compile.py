"""Hidden: the Triton kernels of flash_triton.py build for the course GPU in bf16 and fp16, on any machine.

On a CPU the kernels run interpreted, which accepts code a GPU compiler rejects (a tl.dot of fp32 P
with bf16 V) and never meets a GPU's limits. Here the student's FlashAttentionTriton runs as on a
GPU (fake CUDA tensors, launches recorded, not run) and each kernel it launches is compiled for the
course GPU with Triton's own compiler (kernels.crosscompile; no GPU needed): it must compile, fit in
the architecture's shared memory per block and put its dots on the tensor cores.

A GPU also runs a grid's programs in no fixed order, the interpreter in increasing order: on a CPU the
forward and the backward run their programs reversed and shuffled too and must give the same outputs
(kernels.program_order), which catches a program that writes past its own tile and is repaired by a
later program.

The course GPU is sm_90 (H100, H200) unless LLMSYS_COURSE_GPU names another target (sm_80, sm_100).
The build report comes from the sandbox, so it is judged here against this process's own limits, and
its points need the same task's kernels to be right first: each test checks a tiny float32 case
(interpreted on a CPU) before it asks for the build, and is marked with the task whose static rules
block it. The kernels built must be kernels that value check launched: a GPU may change their tiles,
warps, stages and grid, not which kernels run (a kernel launched only when CUDA is there would be
built and never tested).
"""

import os

import pytest
import torch

from autograder.suites.flash_attention import scenarios
from kernels.crosscompile import TARGETS, report_problems, unrun_kernel_problems
from kernels.device import default_device
from kernels.hardware import ARCHITECTURE_GPUS, SHARED_MEMORY_PER_BLOCK

pytestmark = [pytest.mark.visibility("hidden"), pytest.mark.triton]

COURSE_GPU_VARIABLE = "LLMSYS_COURSE_GPU"
DEVICE = str(default_device())
# The shapes the kernels are built for: the largest head dim of the course (the most shared memory).
BUILD_CASE = dict(lead=[1, 2], n=256, head_dim=128, is_causal=True)
TINY = dict(lengths=(1, 48), head_dims=(16, 32), lead_sizes=(1, 2))
ORDER_CASE = dict(lengths=(33, 48), head_dims=(16,), lead_sizes=(1, 2), tiles=(16,))  # 3 tiles a side


def course_target() -> str:
    target = os.environ.get(COURSE_GPU_VARIABLE, "sm_90")
    if target not in TARGETS:
        raise pytest.UsageError(f"{COURSE_GPU_VARIABLE}={target!r} is not a target; use one of {list(TARGETS)}")
    return target


def judge(answer, part: str, dtype: str, target: str) -> list[str]:
    """What stops `part`'s kernels from running on the target, from the worker's report (plain data)."""
    where = f"FlashAttentionTriton's {part} in {dtype} on {target} ({ARCHITECTURE_GPUS[target]})"
    return report_problems(answer, where, target, SHARED_MEMORY_PER_BLOCK[target])


def build_call(part: str, dtype: str) -> dict:
    """The keyword arguments of scenarios.triton_gpu_builds for `part`'s build check in `dtype`."""
    return dict(dtype=dtype, target=course_target(), part=part, **BUILD_CASE)


def assert_builds(student, part: str, dtype: str, got) -> None:
    """`part`'s build check, after its value check `got` (a scenario's plain data, with the kernels it launched)."""
    call = build_call(part, dtype)
    answer = student.run(scenarios.triton_gpu_builds, **call)
    launched = got.get("launches") if isinstance(got, dict) else None
    assert type(launched) is list and all(type(n) is str for n in launched), "the value check reported no launches"
    problems = judge(answer, part, dtype, call["target"])
    problems += unrun_kernel_problems(answer, f"FlashAttentionTriton's {part}", launched)
    assert not problems, "\n".join(problems)


# Which part each build check builds: the grader starts those builds once the tests are collected, beside
# them (autograder.grading.ahead), and a check takes its answer from there.
BUILD_CHECKS = {"test_triton_forward_kernels_build_for_the_course_gpu": "forward",
                "test_triton_backward_kernels_build_for_the_course_gpu": "backward"}
BUILD_SCENARIO = scenarios.triton_gpu_builds  # what each of them asks for, in each scenarios.BUILD_DTYPES


def builds_ahead(items: list) -> list:
    """(scenario, keyword arguments) of the builds that these collected tests of this module will ask for."""
    return [(scenarios.triton_gpu_builds, build_call(BUILD_CHECKS[item.originalname], item.callspec.params["dtype"]))
            for item in items if item.originalname in BUILD_CHECKS]


@pytest.mark.points(2)
@pytest.mark.edge
@pytest.mark.task("flash_triton.flash_forward_triton")
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_triton_forward_kernels_build_for_the_course_gpu(student, trusted, rng, dtype):
    """The kernels FlashAttentionTriton's forward launches on a GPU (default tiles, d 128, causal) compile
    for the course GPU (sm_90 unless configured) in bf16 and fp16, fit its shared memory per block at the
    first autotune config, and use tensor-core instructions for every tl.dot; only for a forward that
    matches float64 at a tiny causal float32 case, and only kernels that forward launched there.

    Hint: cast P to V's dtype before tl.dot (p.to(v.dtype)); a GPU compiler rejects fp32 x bf16.
    """
    case = trusted.draw(rng, **TINY, tiles=(16, 32), causal=BUILD_CASE["is_causal"])
    x = case.inputs(rng.randrange(2**31))
    got = student.run(scenarios.triton_forward, q=x["q"], k=x["k"], v=x["v"], is_causal=case.is_causal,
                      q_tile=case.q_tile, k_tile=case.k_tile, device=DEVICE)
    expected_o, _ = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    trusted.assert_close(f"o ({case}; the build is checked only for a right forward)", got["o"], expected_o,
                         torch.float32, trusted.fp32)
    assert_builds(student, "forward", dtype, got)


@pytest.mark.points(2)
@pytest.mark.edge
@pytest.mark.task("flash_triton.flash_backward_triton")
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_triton_backward_kernels_build_for_the_course_gpu(student, trusted, rng, dtype):
    """The kernels FlashAttentionTriton's backward launches on a GPU (default tiles, d 128, causal) compile
    for the course GPU in bf16 and fp16, fit its shared memory per block at the first autotune config, and
    use tensor-core instructions for every tl.dot; only for a backward that matches float64 autograd at a
    tiny causal float32 case, and only kernels that backward launched there.

    Hint: cast P and dS to the input dtype before tl.dot (p.to(do.dtype), ds.to(q.dtype)).
    """
    case = trusted.draw(rng, **TINY, tiles=(16, 32), causal=BUILD_CASE["is_causal"])
    x = case.inputs(rng.randrange(2**31))
    o, lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    got = student.run(scenarios.triton_backward, q=x["q"], k=x["k"], v=x["v"], o=o.float(), lse=lse.float(),
                      do=x["do"], is_causal=case.is_causal, q_tile=case.q_tile, k_tile=case.k_tile, device=DEVICE)
    for name, want in zip(("dq", "dk", "dv"), trusted.gradients64(x["q"], x["k"], x["v"], x["do"], case.is_causal)):
        trusted.assert_close(f"{name} ({case}; the build is checked only for a right backward)", got[name], want,
                             torch.float32, trusted.fp32)
    assert_builds(student, "backward", dtype, got)


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.parametrize("part", [
    pytest.param("forward", marks=pytest.mark.task("flash_triton.flash_forward_triton")),
    pytest.param("backward", marks=pytest.mark.task("flash_triton.flash_backward_triton"))])
def test_triton_kernels_give_the_same_output_in_any_program_order(student, trusted, rng, part):
    """The outputs of flash_forward_triton (o, lse) and flash_backward_triton (dq, dk, dv) at a tiny float32
    case of three tiles a side do not change when the kernels' programs run reversed or shuffled, as a GPU
    may run them (the backward's within rounding, for dQ added with atomics): no program writes another
    program's tile. Checked under the interpreter, which chooses the order (on a CPU; the grader does so on
    a GPU machine too, in a worker without the GPU).

    Hint: mask each store to the program's own tile (rows below n_queries, keys below n_keys).
    """
    case = trusted.draw(rng, **ORDER_CASE)
    x = case.inputs(rng.randrange(2**31))
    o, lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    problems = student.run(scenarios.triton_program_order, part=part, q=x["q"], k=x["k"], v=x["v"], o=o.float(),
                           lse=lse.float(), do=x["do"], is_causal=case.is_causal, q_tile=case.q_tile,
                           k_tile=case.k_tile, device=DEVICE)
    if problems is None:
        pytest.skip("programs run in the hardware's order on a GPU: checked under the interpreter (the grader does)")
    assert type(problems) is list, f"the program-order check returned {type(problems).__name__}, not a list"
    assert not problems, f"{case}:\n" + "\n".join(map(str, problems))
