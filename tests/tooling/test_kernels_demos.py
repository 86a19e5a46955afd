"""kernels.demos: the lecture's add and GeLU kernels (interpreted on a CPU) and their counts."""

import pytest
import torch

from kernels.device import default_device


@pytest.mark.triton
@pytest.mark.parametrize("n", [1, 1000, 3000])  # below, inside and across BLOCK = 1024
def test_the_kernels_compute_add_and_tanh_gelu(n):
    from kernels import demos

    gen = torch.Generator().manual_seed(0)
    x, y = (torch.randn(n, generator=gen).to(default_device()) for _ in range(2))
    assert torch.equal(demos.add(x, y), x + y)
    torch.testing.assert_close(demos.gelu(x), torch.nn.functional.gelu(x, approximate="tanh"), atol=1e-6, rtol=1e-5)


@pytest.mark.triton
def test_add_refuses_mismatched_shapes():
    from kernels import demos

    with pytest.raises(ValueError, match="one shape"):
        demos.add(torch.zeros(3), torch.zeros(4))


@pytest.mark.triton
def test_counts_and_intensities_match_the_lecture():
    from kernels import demos

    n = 1 << 20
    assert demos.add_flops(n) == n and demos.add_bytes(n) == 3 * n * 2
    assert demos.gelu_flops(n) == 20 * n and demos.gelu_bytes(n, 4) == 2 * n * 4
    # The lecture: GeLU counted as 20 FLOPs per element has intensity 5 in bf16.
    assert demos.gelu_flops(n) / demos.gelu_bytes(n) == 5.0
    assert demos.add_flops(n) / demos.add_bytes(n) == pytest.approx(1 / 6)
