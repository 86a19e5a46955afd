"""softmax.py: softmax_triton, interpreted on a CPU (float32) or compiled on a GPU (handout §3)."""

import pytest
import torch

from kernels.device import default_device
from tests.gpu_kernels import scenarios

DEVICE = str(default_device())
SOFTMAX = "gpu_kernels.softmax"

pytestmark = pytest.mark.triton

# (stored shape, view, block_size)
CASES = {
    "4x37-one-block": ((4, 37), None, None),
    "2x3x100-rows-of-7-blocks-of-16": ((2, 3, 100), None, 16),
    "5x130-every-other-column-blocks-of-32": ((5, 130), "step", 32),
    "40x9-transposed": ((40, 9), "t", None),
}


@pytest.mark.points(2)
@pytest.mark.task("softmax.softmax_triton")
@pytest.mark.parametrize("case", list(CASES))
def test_softmax_matches_float64(student, trusted, case):
    """softmax_triton in float32 matches float64 softmax over the last dim within 1e-4: rows in one block,
    rows longer than a block (block_size 16 or 32, lengths not multiples of it), strided rows.

    Hint (values, scale, close): rows longer than a block: an online pass for the running max and sum, then a
    writing pass with the final max and sum.
    Hint (nan): NaN comes from inf - inf or 0 / 0: masked lanes load other=float("-inf") before a max or an
    exp, and every row's sum holds at least exp(max - max) = 1.
    """
    shape, view, block_size = CASES[case]
    x = trusted.randn(20, *shape, scale=4.0)
    got = student.run(scenarios.softmax, x=x, view=view, block_size=block_size, device=DEVICE)
    trusted.assert_close("softmax", got["y"], trusted.softmax64(trusted.view(x, view)), torch.float32,
                         trusted.fp32)


@pytest.mark.points(2)
@pytest.mark.task("softmax.softmax_triton")
@pytest.mark.parametrize("block_size", [None, 16], ids=["one-block", "blocks-of-16"])
def test_softmax_is_stable_at_large_inputs(student, trusted, block_size):
    """softmax_triton of values up to ±1000 (exp overflows past 89 in float32) matches float64, in one
    block and over blocks of 16 where the row maximum sits in a later block.

    Hint (nan): exp overflows past 89 in float32: subtract the row maximum before exp.
    Hint (values, scale, close): with blocks, rescale the running sum by exp(m_old - m_new) whenever the
    maximum grows.
    """
    x = trusted.randn(21, 3, 50, scale=300.0)
    x[:, 45] = 1000.0
    got = student.run(scenarios.softmax, x=x, view=None, block_size=block_size, device=DEVICE)
    trusted.assert_close("softmax", got["y"], trusted.softmax64(x), torch.float32, trusted.fp32)


@pytest.mark.points(1)
@pytest.mark.edge
@pytest.mark.task("softmax.softmax_triton")
def test_softmax_launches_one_triton_kernel(student, trusted):
    """softmax_triton launches one Triton kernel, also for rows longer than a block (fused)."""
    got = student.run(scenarios.softmax, x=trusted.randn(22, 3, 70), view=None, block_size=16, device=DEVICE)
    assert len(set(got["launches"])) == 1, f"expected one Triton kernel, got {sorted(set(got['launches']))}"


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("softmax.softmax_triton")
def test_softmax_rejects_what_it_cannot_compute(student):
    """softmax_triton raises TypeError for an integer tensor and ValueError for a 0-d tensor or a block_size
    that is not a power of two >= 16."""
    softmax = student.module(SOFTMAX).softmax_triton
    with pytest.raises(TypeError):
        softmax(torch.arange(6))
    with pytest.raises(ValueError):
        softmax(torch.tensor(1.0))
    for block_size in (8, 24):
        with pytest.raises(ValueError):
            softmax(torch.zeros(2, 40), block_size)


@pytest.mark.gpu
@pytest.mark.points(1)
@pytest.mark.task("softmax.softmax_triton")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_softmax_half_precision_on_gpu(student, trusted, dtype):
    """On a GPU, softmax_triton in bf16/fp16 (default blocks, rows of 10000: longer than one block) returns
    that dtype, within the dtype's relative tolerance of float64 softmax of the same inputs (atol 1e-6)."""
    x = trusted.randn(23, 3, 10000, dtype=dtype, scale=4.0)
    got = student.run(scenarios.softmax, x=x, view=None, block_size=None, device="cuda")
    trusted.assert_close("softmax", got["y"], trusted.softmax64(x), dtype, trusted.softmax_half[dtype])
