"""kernels.launches: recording the Triton kernels launched inside a block."""

import pytest
import torch

pytestmark = pytest.mark.triton


def test_a_demo_kernel_launch_is_recorded_by_name():
    from kernels import demos
    from kernels.launches import record_launches

    x = torch.randn(100, device="cuda" if torch.cuda.is_available() else "cpu")
    with record_launches() as launches:
        demos.add(x, x)
        demos.gelu(x)
        demos.add(x, x)
    assert launches.names == ["_add_kernel", "_gelu_kernel", "_add_kernel"]
    assert launches.count == 3 and launches.counts() == {"_add_kernel": 2, "_gelu_kernel": 1}


def test_nothing_is_recorded_outside_the_block_and_the_launch_path_is_restored():
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    from kernels import demos
    from kernels.launches import record_launches

    before = (JITFunction.__dict__.get("run"), InterpretedFunction.__dict__.get("run"))
    x = torch.randn(10, device="cuda" if torch.cuda.is_available() else "cpu")
    with record_launches() as launches:
        pass
    demos.add(x, x)
    assert launches.names == []
    assert (JITFunction.__dict__.get("run"), InterpretedFunction.__dict__.get("run")) == before


def test_pytorch_code_launches_no_triton_kernel():
    from kernels.launches import record_launches

    with record_launches() as launches:
        torch.randn(8, 8) @ torch.randn(8, 8)
    assert launches.count == 0


def test_a_constexpr_value_for_a_plain_parameter_is_the_constant_a_gpu_launch_makes_it():
    """`LOG2E / math.sqrt(d)` is a tl.constexpr: Triton's own launcher specialises it as a constant of the
    build (kernels.launches.specialization says {"constexpr": 64} of it, compiled), so the recorded launch,
    which the GPU builds are made from, says so too, not an untyped argument."""
    import triton.language as tl

    from kernels import demos
    from kernels.launches import describe_launch

    x = torch.randn(64)
    args, kwargs = (x, x, x, tl.constexpr(64)), {"BLOCK": 64}
    described = {arg["name"]: arg for arg in describe_launch(demos._add_kernel, args, kwargs)["args"]}
    assert described["n"] == {"name": "n", "constexpr": 64}
