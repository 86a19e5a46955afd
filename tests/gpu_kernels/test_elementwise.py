"""elementwise.py: gelu_triton, interpreted on a CPU (float32) or compiled on a GPU (handout §2).

Without a GPU the kernel runs under Triton's interpreter: the shapes here are small. On a GPU the
same tests run on CUDA tensors, and the bf16/fp16 and bandwidth tests run too.
"""

import pytest
import torch

from kernels.device import default_device
from tests.gpu_kernels import scenarios

DEVICE = str(default_device())
ELEMENTWISE = "gpu_kernels.elementwise"

pytestmark = pytest.mark.triton

# (shape of the stored tensor, the view the kernel gets)
CASES = {
    "3x5x7-dense": ((3, 5, 7), None),
    "33x40-transposed": ((33, 40), "t"),
    "6x2049-every-other-column": ((6, 2049), "step"),
}


@pytest.mark.points(2)
@pytest.mark.task("elementwise.gelu_triton")
@pytest.mark.parametrize("case", list(CASES))
def test_gelu_matches_float64(student, trusted, case):
    """gelu_triton in float32 matches float64 GeLU (tanh approximation) within 1e-4, for a dense tensor,
    a transposed view and a view with a column step (sizes that are not multiples of the block).

    Hint (values, nan): make a strided x dense first (x.contiguous()), or index it with its strides; mask the
    last block.
    Hint (shape): return a tensor of x's shape and dtype, e.g. allocated with torch.empty_like of the dense x.
    Hint (close, scale): the tanh approximation with the handout's constants, computed in float32.
    """
    shape, view = CASES[case]
    x = trusted.randn(10, *shape, scale=3.0)
    got = student.run(scenarios.gelu, x=x, view=view, device=DEVICE)
    trusted.assert_close("gelu", got["y"], trusted.gelu64(trusted.view(x, view)), torch.float32, trusted.fp32)


@pytest.mark.points(1)
@pytest.mark.task("elementwise.gelu_triton")
def test_gelu_is_the_tanh_approximation_at_large_inputs(student, trusted):
    """gelu_triton gives x for large positive x and 0 for large negative x (no inf, no nan: exp overflows at
    89 in float32), and the tanh approximation, not the exact erf GeLU, near x = ±2, where they differ."""
    x = torch.tensor([-1e4, -300.0, -50.0, -2.5, -2.0, -1.5, 1.5, 2.0, 2.5, 50.0, 300.0, 1e4])
    got = student.run(scenarios.gelu, x=x, view=None, device=DEVICE)
    trusted.assert_close("gelu", got["y"], trusted.gelu64(x), torch.float32, dict(atol=1e-5, rtol=1e-6))


@pytest.mark.points(1)
@pytest.mark.edge
@pytest.mark.task("elementwise.gelu_triton")
def test_gelu_launches_one_triton_kernel(student, trusted):
    """gelu_triton launches one Triton kernel (kernels.launches records it; an autotuner's trial runs of it
    count once)."""
    got = student.run(scenarios.gelu, x=trusted.randn(11, 300), view=None, device=DEVICE)
    assert len(set(got["launches"])) == 1, f"expected one Triton kernel, got {sorted(set(got['launches']))}"


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("elementwise.gelu_triton")
def test_gelu_rejects_what_it_cannot_compute(student):
    """gelu_triton raises TypeError for an integer tensor, a float64 tensor and a list."""
    gelu = student.module(ELEMENTWISE).gelu_triton
    for bad in (torch.arange(6), torch.zeros(4, dtype=torch.float64), [1.0, 2.0]):
        with pytest.raises(TypeError):
            gelu(bad)


# ---- On a GPU only: half precision and bandwidth ------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.points(1)
@pytest.mark.task("elementwise.gelu_triton")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gelu_half_precision_on_gpu(student, trusted, dtype):
    """On a GPU, gelu_triton in bf16/fp16 returns that dtype, close to float64 GeLU of the same inputs."""
    x = trusted.randn(12, 257, 129, dtype=dtype, scale=3.0)
    got = student.run(scenarios.gelu, x=x, view="t", device="cuda")
    trusted.assert_close("gelu", got["y"], trusted.gelu64(x.transpose(-1, -2)), dtype, trusted.half[dtype])


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.edge
@pytest.mark.task("elementwise.gelu_triton")
def test_gelu_keeps_up_with_torch_bandwidth_on_gpu(student):
    """On a GPU, gelu_triton on 2²⁶ bf16 elements reaches at least 0.8x the bandwidth of torch's
    F.gelu(approximate="tanh"), both timed with do_bench in the same run (the same bytes move, so
    that is a time at most 1.25x torch's).

    Hint: 1024 or more elements per program, int64 offsets, one load and one store per element.
    """
    times = student.run(scenarios.gelu_ms, numel=1 << 26, dtype=torch.bfloat16)
    ours, theirs = times["triton"], times["torch"]
    assert type(ours) is float and ours > 0, f"expected a positive time in ms, got {ours!r}"
    assert theirs / ours >= 0.8, (f"gelu_triton {ours:.4f} ms vs torch {theirs:.4f} ms: {theirs / ours:.2f}x "
                                  "torch's bandwidth; 0.8x needed")
