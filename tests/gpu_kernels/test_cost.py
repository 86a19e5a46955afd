"""§5 and §6: FLOPs and HBM bytes of the three kernels, what fusion saves, tiles, waves and tile efficiency.

Expected values are the handout's formulas written out here, and the SM counts of kernels.hardware.
"""

import pytest
import torch

from kernels.hardware import gpu

BF16, FP32 = torch.bfloat16, torch.float32


@pytest.fixture(scope="session")
def cost(student):
    return student.module("gpu_kernels.cost")


def assert_pair(got, flops: int, bytes_moved: int) -> None:
    assert type(got) is tuple and len(got) == 2, f"expected a tuple (flops, bytes), got {got!r}"
    assert all(type(v) is int for v in got), f"FLOPs and bytes must be ints, got {got!r}"
    assert got == (flops, bytes_moved), f"expected (flops, bytes) = {(flops, bytes_moved)}, got {got}"


@pytest.mark.points(1)
@pytest.mark.task("cost.elementwise_cost")
def test_gelu_costs_20_flops_and_4_bytes_per_bf16_element(cost):
    """GeLU over 1024 bf16 elements: 20 FLOPs each (the default), x read once and y written once, 2 bytes
    each: (20480, 4096), the lecture's intensity of 5 FLOP/byte."""
    got = cost.elementwise_cost(1024, BF16)
    assert_pair(got, 20 * 1024, 2 * 1024 * 2)
    assert got[0] / got[1] == 5


@pytest.mark.points(1)
@pytest.mark.task("cost.elementwise_cost")
def test_elementwise_cost_follows_flops_per_element_and_dtype(cost):
    """ReLU (1 FLOP per element) over 3000 fp32 elements: (3000, 24000), intensity 0.125."""
    assert_pair(cost.elementwise_cost(3000, FP32, flops_per_element=1), 3000, 2 * 3000 * 4)


@pytest.mark.points(1)
@pytest.mark.task("cost.softmax_cost")
def test_softmax_reads_x_once_per_pass_and_writes_the_output_once(cost):
    """A (256, 1000) fp32 softmax: 5 FLOPs per element; one pass moves 2·256·1000·4 bytes, two passes
    3·256·1000·4 (x read twice)."""
    elements = 256 * 1000
    assert_pair(cost.softmax_cost(256, 1000, FP32), 5 * elements, 2 * elements * 4)
    assert_pair(cost.softmax_cost(256, 1000, FP32, passes=2), 5 * elements, 3 * elements * 4)


@pytest.mark.points(1)
@pytest.mark.task("cost.matmul_cost")
def test_1024_cubed_bf16_matmul_costs_2mnk_flops_and_a_b_c_once(cost):
    """1024³ in bf16: 2·1024³ FLOPs over 3·1024²·2 bytes, intensity 1024 / 3 ≈ 341 (compute-bound on an H100)."""
    got = cost.matmul_cost(1024, 1024, 1024, BF16)
    assert_pair(got, 2 * 1024**3, 3 * 1024**2 * 2)
    assert got[0] / got[1] > gpu("H100").ridge_point()


@pytest.mark.points(1)
@pytest.mark.task("cost.matmul_cost")
def test_matmul_cost_counts_the_bias_and_the_activation_of_the_epilogue(cost):
    """A (64, 96) by (96, 48) fp32 matmul with bias and GeLU: 2mnk + (1 + 20)·mn FLOPs; A, B, C and the
    48-element bias once each. With ReLU instead: 2mnk + (1 + 1)·mn."""
    m, n, k = 64, 48, 96
    ideal = (m * k + k * n + m * n + n) * 4
    assert_pair(cost.matmul_cost(m, n, k, FP32, bias=True, activation="gelu"), 2 * m * n * k + 21 * m * n, ideal)
    assert_pair(cost.matmul_cost(m, n, k, FP32, bias=True, activation="relu"), 2 * m * n * k + 2 * m * n, ideal)
    assert_pair(cost.matmul_cost(m, n, k, FP32, activation="gelu"), 2 * m * n * k + 20 * m * n, ideal - n * 4)


@pytest.mark.points(2)
@pytest.mark.task("cost.fusion_savings")
def test_fusing_bias_and_gelu_saves_four_passes_over_the_output(cost):
    """Unfused, the (m, n) product is written, read and written again by the bias add, then read by the
    GeLU: 4·m·n elements more than the fused kernel moves. (4096, 4096, 4096) in bf16: 134,217,728 bytes.

    Hint: every intermediate costs a write and a read; the bias and the inputs are read in both versions.
    """
    got = cost.fusion_savings(4096, 4096, 4096, BF16)
    assert type(got) is int and got == 4 * 4096 * 4096 * 2 == 134_217_728, f"got {got!r}"
    assert cost.fusion_savings(100, 30, 7, FP32) == 4 * 100 * 30 * 4


@pytest.mark.points(1)
@pytest.mark.task("cost.tiles")
def test_tiles_count_the_partial_tiles_at_the_edges(cost):
    """A (129, 100) output in 128 × 64 tiles is 2 × 2 = 4 tiles (ceil, not floor); (128, 128) is 1."""
    got = cost.tiles(129, 100, 128, 64)
    assert type(got) is int and got == 4, f"got {got!r}"
    assert cost.tiles(128, 128, 128, 128) == 1


@pytest.mark.points(2)
@pytest.mark.task("cost.waves")
def test_133_tiles_on_a_132_sm_h100_take_two_waves(cost):
    """An (896, 2432) output in 128 × 128 tiles is 7 × 19 = 133 tiles: on the H100's 132 SMs, two waves;
    (896, 2304) is 7 × 18 = 126 tiles, one wave."""
    sms = gpu("H100").num_sms
    assert cost.tiles(896, 2432, 128, 128) == 133
    got = cost.waves(896, 2432, 128, 128, sms)
    assert type(got) is int and got == 2, f"got {got!r}"
    assert cost.waves(896, 2304, 128, 128, sms) == 1


@pytest.mark.points(2)
@pytest.mark.task("cost.tile_efficiency")
def test_tile_efficiency_counts_padding_and_the_idle_sms_of_the_last_wave(cost):
    """m·n / (waves · SMs · tile_m · tile_n): 133 full tiles on 132 SMs use 133 of 264 tile slots (0.504);
    132 full tiles use all of them (1.0); one (100, 100) output in a 128 × 128 tile on one SM is 0.61."""
    sms = gpu("H100").num_sms
    got = cost.tile_efficiency(896, 2432, 128, 128, sms)
    assert type(got) is float and got == pytest.approx(133 / 264, rel=1e-12), f"got {got!r}"
    for args, expected in (((1536, 1408, 128, 128, sms), 1.0), ((100, 100, 128, 128, 1), 100 * 100 / 128**2)):
        got = cost.tile_efficiency(*args)
        assert type(got) is float and got == pytest.approx(expected, rel=1e-12), f"{args}: got {got!r}"


def invalid(function, *args, names, **kwargs):
    return pytest.param(function, args, kwargs, names, marks=pytest.mark.task(f"cost.{function}"),
                        id=f"{function}{args}{kwargs or ''}")


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.parametrize("function, args, kwargs, name", [
    invalid("elementwise_cost", 0, BF16, names="numel"),
    invalid("elementwise_cost", 16, torch.int32, names="dtype"),
    invalid("softmax_cost", 4, 8, FP32, passes=0, names="passes"),
    invalid("matmul_cost", 4, 4, -4, BF16, names="k"),
    invalid("matmul_cost", 4, 4, 4, BF16, activation="tanh", names="activation"),
    invalid("fusion_savings", 4, 0, 4, BF16, names="n"),
    invalid("tiles", 10, 10, 0, 8, names="tile_m"),
    invalid("waves", 10, 10, 8, 8, 0, names="num_sms"),
    invalid("tile_efficiency", 10, 10, 8, 8.5, 4, names="tile_n"),
])
def test_cost_functions_reject_invalid_arguments(cost, function, args, kwargs, name):
    """A size, tile or SM count below 1 (or not an int), a dtype that is not floating point, passes below 1
    or an unknown activation raise ValueError naming the argument."""
    with pytest.raises(ValueError, match=rf"\b{name}\b"):  # the name as a word, not a letter of one
        getattr(cost, function)(*args, **kwargs)
