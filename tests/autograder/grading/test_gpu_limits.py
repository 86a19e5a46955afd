"""The per-call limit of a GPU grader's worker leaves room for Triton's compiler.

On a GPU a call that first launches a kernel also compiles it (six configs of each flash_attention kernel
under the given `_autotune_on_gpu`): on an H100 one test of the reference took 43 s, most of it compiling,
against the default limit of 60 s of CPU per call. A slower grader's compiler must not cost a correct
submission its points, so a GPU worker's calls get GPU_CALL_FACTOR times the limit; on a CPU nothing changes.
"""

from autograder.grading.runner import GPU_CALL_FACTOR, call_timeout_for, protections_for
from autograder.sandbox import policy
from kernels.device import has_cuda

REFERENCE_HEAVIEST_CALL_S = 43.0  # measured by `make gpu-validate`'s reference step on an H100


def test_a_gpu_workers_calls_get_twice_the_reference_heaviest_compile_at_least():
    default = policy.Limits.call_timeout
    assert call_timeout_for(default, gpu=True) == default * GPU_CALL_FACTOR
    assert call_timeout_for(default, gpu=True) >= 2 * REFERENCE_HEAVIEST_CALL_S
    assert call_timeout_for(default, gpu=False) == default
    assert call_timeout_for(5.0, gpu=True) == 5.0 * GPU_CALL_FACTOR, "an instructor's --timeout is scaled, not replaced"


def test_the_protections_say_the_limit_the_worker_gets():
    """What the grader prints under every grade ("timeout: N s of CPU time per call") is the limit it applies."""
    protections, gpu = protections_for(60.0, "auto")
    assert gpu == has_cuda()
    assert protections.limits.call_timeout == call_timeout_for(60.0, gpu)
    assert f"timeout: {call_timeout_for(60.0, gpu):g} s of CPU time per call" in "\n".join(protections.lines())
