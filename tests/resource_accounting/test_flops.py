"""§3 to §6: counting FLOPs, arithmetic intensity and the roofline, training compute, decode vs prefill.

Expected FLOP counts come from torch's own FlopCounterMode (run here, on the trusted side) or from the
lecture's figures.
"""

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from tests.resource_accounting import scenarios

# NVIDIA's H100 SXM datasheet: dense bf16 989.4e12 FLOP/s (the lecture writes 1979e12 / 2), 3.35e12 B/s.
H100_PEAK, H100_BANDWIDTH = 989.4e12, 3.35e12
BF16 = 2


def flop_counter_mode(run) -> dict:
    """What torch's FlopCounterMode counts while `run()` runs: the total and the counts by op."""
    with FlopCounterMode(display=False) as mode:
        run()
    return {"total": mode.get_total_flops(),
            "by_op": {str(op): count for op, count in mode.get_flop_counts()["Global"].items()}}


def assert_counts(got: dict, expected: dict) -> None:
    assert type(got["total"]) is int, f"total_flops must be an int, got {type(got['total']).__name__}"
    assert all(type(v) is int for v in got["by_op"].values()), f"flops_by_op values must be ints: {got['by_op']}"
    assert got["by_op"] == expected["by_op"], f"flops_by_op: expected {expected['by_op']}, got {got['by_op']}"
    assert got["total"] == expected["total"]


@pytest.mark.points(1)
@pytest.mark.task("flops.matmul_flops")
def test_matmul_flops_is_2mnp(flops):
    """An (m, n) @ (n, p) matmul is 2·m·n·p FLOPs, an int: 120 for (3, 4, 5), 2·1024³ for the 1024³ matmul."""
    got = flops.matmul_flops(3, 4, 5)
    assert type(got) is int and got == 120
    assert flops.matmul_flops(1024, 1024, 1024) == 2 * 1024**3


@pytest.mark.points(3)
@pytest.mark.task("flops.FlopCounter")
@pytest.mark.parametrize("batch_shape", [[8], [2, 4]], ids=["2d-input", "3d-input"])
def test_flop_counter_matches_flop_counter_mode_on_mlp_forward_and_backward(student, batch_shape):
    """FlopCounter's total and per-op counts ("aten.addmm", "aten.mm") equal FlopCounterMode's on an MLP step.

    The MLP is Linear(6, 16), ReLU, Linear(16, 16), ReLU, Linear(16, 3); forward then backward of the sum.
    Hint: count in __torch_dispatch__ from the argument shapes; key by str(func.overloadpacket).
    """
    dims = [6, 16, 16, 3]
    got = student.run(scenarios.flop_counter_mlp, seed=0, batch_shape=batch_shape, dims=dims)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))
    x = torch.randn(*batch_shape, dims[0])
    assert_counts(got, flop_counter_mode(lambda: model(x).sum().backward()))


@pytest.mark.points(2)
@pytest.mark.task("flops.FlopCounter")
def test_flop_counter_matches_flop_counter_mode_on_bmm_and_baddbmm(student):
    """FlopCounter counts torch.bmm and torch.baddbmm, forward and backward, exactly as FlopCounterMode does."""
    got = student.run(scenarios.flop_counter_batched, seed=0, batch=3, m=4, n=5, p=6)
    a, b = torch.randn(3, 4, 5, requires_grad=True), torch.randn(3, 5, 6, requires_grad=True)
    bias = torch.randn(3, 4, 6, requires_grad=True)
    assert_counts(got, flop_counter_mode(lambda: (torch.bmm(a, b).sum() + torch.baddbmm(bias, a, b).sum()).backward()))


@pytest.mark.points(2)
@pytest.mark.task("flops.FlopCounter")
def test_flop_counter_counts_elementwise_ops_per_output_element_when_asked(student):
    """With count_elementwise=True, aten add, sub, mul and div each count one FLOP per output element.

    On a (4, 1) + (1, 8) broadcast the output has 32 elements: 32 FLOPs, not 4 or 8; the
    (4, 8) @ (8, 3) matmul adds 2·4·8·3 as usual.
    """
    got = student.run(scenarios.flop_counter_elementwise, seed=0, rows=4, cols=8, count_elementwise=True)
    by_op = {"aten.add": 32, "aten.mul": 32, "aten.sub": 32, "aten.div": 32, "aten.mm": 2 * 4 * 8 * 3}
    assert_counts(got, {"by_op": by_op, "total": sum(by_op.values())})


@pytest.mark.points(1)
@pytest.mark.task("flops.FlopCounter")
def test_flop_counter_ignores_elementwise_ops_by_default(student):
    """By default FlopCounter counts only the matmuls, like FlopCounterMode: flops_by_op has "aten.mm" alone."""
    got = student.run(scenarios.flop_counter_elementwise, seed=0, rows=4, cols=8, count_elementwise=False)
    assert_counts(got, {"by_op": {"aten.mm": 2 * 4 * 8 * 3}, "total": 2 * 4 * 8 * 3})


@pytest.mark.points(1)
@pytest.mark.task("flops.arithmetic_intensity")
def test_arithmetic_intensity_is_flops_per_byte(flops):
    """ReLU in bf16 does 1 FLOP per element and moves 4 bytes (read 2, write 2): intensity 0.25."""
    n = 1024
    got = flops.arithmetic_intensity(n, 2 * n * BF16)
    assert type(got) is float and got == 0.25


@pytest.mark.points(1)
@pytest.mark.task("flops.matmul_arithmetic_intensity")
def test_1024_cubed_bf16_matmul_has_intensity_341(flops):
    """A 1024³ matmul in bf16: 2·1024³ FLOPs over 3·1024²·2 bytes = 1024 / 3 ≈ 341.3 FLOP/byte."""
    got = flops.matmul_arithmetic_intensity(1024, 1024, 1024, BF16)
    assert type(got) is float and got == pytest.approx(1024 / 3, rel=1e-12), f"got {got!r}"
    got = flops.matmul_arithmetic_intensity(2, 3, 4, 4)
    assert type(got) is float and got == pytest.approx(48 / ((6 + 12 + 8) * 4), rel=1e-12), f"got {got!r}"


@pytest.mark.points(1)
@pytest.mark.task("flops.ridge_point")
def test_h100_ridge_point_is_about_295_flop_per_byte(flops):
    """The H100's ridge point is 989.4e12 FLOP/s / 3.35e12 B/s ≈ 295 FLOP/byte."""
    got = flops.ridge_point(H100_PEAK, H100_BANDWIDTH)
    assert type(got) is float and got == pytest.approx(H100_PEAK / H100_BANDWIDTH, rel=1e-12)
    assert round(got) == 295


@pytest.mark.points(0.5)
@pytest.mark.task("flops.attainable_flops_per_sec")
@pytest.mark.parametrize("intensity", [0.25, 5.0, 1024 / 3, 2000.0])
def test_attainable_flops_follow_the_roofline(flops, intensity):
    """attainable_flops_per_sec is min(peak, intensity × bandwidth): the slope below the ridge, the peak above."""
    expected = min(H100_PEAK, intensity * H100_BANDWIDTH)
    got = flops.attainable_flops_per_sec(intensity, H100_PEAK, H100_BANDWIDTH)
    assert type(got) is float and got == pytest.approx(expected, rel=1e-12), f"got {got!r}"


@pytest.mark.points(2)
@pytest.mark.task("flops.is_compute_bound")
def test_lecture_ops_are_memory_or_compute_bound_on_an_h100(flops):
    """On an H100, ReLU, GeLU and matrix-vector are memory-bound; the 1024³ matmul (341) is compute-bound
    (one test, so that a constant True or False earns nothing)."""
    for name, intensity, bound in [("relu", 0.25, False), ("gelu", 5.0, False), ("matrix-vector", 1.0, False),
                                   ("matmul-1024", 1024 / 3, True)]:
        got = flops.is_compute_bound(intensity, H100_PEAK, H100_BANDWIDTH)
        assert got is bound, f"{name} (intensity {intensity:.4g}): expected {bound}, got {got!r}"


@pytest.mark.points(1)
@pytest.mark.task("flops.training_flops")
def test_training_flops_are_6_n_t(flops):
    """Training 70B parameters on 15T tokens takes 6 × 70e9 × 15e12 = 6.3e24 FLOPs (a float)."""
    got = flops.training_flops(70e9, 15e12)
    assert type(got) is float and got == pytest.approx(6.3e24, rel=1e-12)


@pytest.mark.points(2)
@pytest.mark.task("flops.training_days")
def test_70b_on_15t_tokens_on_1024_h100s_at_mfu_half_takes_about_144_days(flops):
    """6.3e24 FLOPs on 1024 GPUs at 989.4e12 FLOP/s and MFU 0.5 take 6.3e24 / (1024·989.4e12·0.5) s ≈ 143.9 days."""
    got = flops.training_days(70e9, 15e12, 1024, H100_PEAK, 0.5)
    assert type(got) is float
    assert got == pytest.approx(6 * 70e9 * 15e12 / (1024 * H100_PEAK * 0.5) / 86400, rel=1e-12)
    assert round(got, 1) == 143.9


@pytest.mark.points(1)
@pytest.mark.task("flops.mfu")
def test_mfu_is_achieved_flops_per_second_over_peak(flops):
    """Doing 4e15 FLOPs in 10 s on a 989.4e12 FLOP/s GPU is an MFU of 4e14 / 989.4e12 ≈ 0.404."""
    got = flops.mfu(4e15, 10.0, H100_PEAK)
    assert type(got) is float and got == pytest.approx(4e14 / H100_PEAK, rel=1e-12), f"got {got!r}"


@pytest.mark.points(0.5)
@pytest.mark.task("flops.decode_arithmetic_intensity")
@pytest.mark.parametrize("rows, d_model", [(1, 8192), (16, 4096), (4096, 8192)])
def test_decode_and_prefill_intensities_are_those_of_the_weight_matmul(flops, rows, d_model):
    """Both are 2·R·D² / ((D² + 2·R·D) · bytes) for R rows (sequences or prompt tokens) times a D×D weight."""
    expected = 2 * rows * d_model**2 / ((d_model**2 + 2 * rows * d_model) * BF16)
    for got in (flops.decode_arithmetic_intensity(rows, d_model, BF16),
                flops.prefill_arithmetic_intensity(rows, d_model, BF16)):
        assert type(got) is float and got == pytest.approx(expected, rel=1e-12), f"got {got!r}"


@pytest.mark.points(2)
@pytest.mark.task("flops.prefill_arithmetic_intensity")
def test_decoding_is_memory_bound_and_prefill_compute_bound_on_an_h100(flops):
    """On an H100 in bf16 with d_model 8192: decoding one sequence (intensity ≈ 1) is below the ridge (≈ 295),
    prefilling a 2048-token prompt (≈ 1365) is above it."""
    ridge = H100_PEAK / H100_BANDWIDTH
    decode = flops.decode_arithmetic_intensity(1, 8192, BF16)
    prefill = flops.prefill_arithmetic_intensity(2048, 8192, BF16)
    for rows, got in ((1, decode), (2048, prefill)):
        expected = 2 * rows * 8192**2 / ((8192**2 + 2 * rows * 8192) * BF16)
        assert type(got) is float and got == pytest.approx(expected, rel=1e-12), \
            f"{rows} rows: intensity {got!r}, expected {expected:.6g}"
    assert decode < 2 < ridge, f"decode intensity {decode} should be about 1 FLOP/byte"
    assert prefill > 1000 > ridge, f"prefill intensity {prefill} should be about 1365 FLOP/byte"


def invalid(function, *args, names):
    """One invalid-argument case, tagged with the contract item it exercises."""
    return pytest.param(function, args, names, marks=pytest.mark.task(f"flops.{function}"), id=f"{function}{args}")


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.parametrize("function, args, names", [
    invalid("matmul_flops", -1, 2, 3, names="m"),
    invalid("matmul_arithmetic_intensity", 4, 4, 4, 0, names="bytes_per_element"),
    invalid("arithmetic_intensity", 10.0, 0, names="bytes_moved"),
    invalid("ridge_point", H100_PEAK, 0, names="bandwidth"),
    invalid("attainable_flops_per_sec", -1.0, H100_PEAK, H100_BANDWIDTH, names="intensity"),
    invalid("is_compute_bound", 5.0, -1.0, H100_BANDWIDTH, names="peak"),
    invalid("training_flops", -70e9, 15e12, names="num_parameters"),
    invalid("training_days", 70e9, 15e12, 0, H100_PEAK, 0.5, names="num_gpus"),
    invalid("training_days", 70e9, 15e12, 1024, H100_PEAK, 0.0, names="mfu"),
    invalid("training_days", 70e9, 15e12, 1024, H100_PEAK, 1.5, names="mfu"),
    invalid("mfu", 1e15, 0.0, H100_PEAK, names="seconds"),
    invalid("decode_arithmetic_intensity", 0, 8192, BF16, names="batch_size"),
    invalid("prefill_arithmetic_intensity", 4096, -8, BF16, names="d_model"),
])
def test_flops_functions_reject_invalid_arguments(flops, function, args, names):
    """Negative or zero sizes, zero GPUs and an MFU outside (0, 1] raise ValueError naming the argument.

    Hint (did not raise, raised, values): the message should say which argument is wrong, what it must be and what was given.
    """
    with pytest.raises(ValueError, match=names):
        getattr(flops, function)(*args)

