"""Hidden tests of §5 and §6: the counting rules, fusion savings, tiles, waves and tile efficiency at random
sizes, dtypes and SM counts (those of the hardware table among them), compared with closed forms here.

Sizes go up to 10⁶ so that 2·m·n·k passes 2⁵³: a count done in floating point loses the exact int.
"""

import math
import random

import pytest
import torch

from kernels.hardware import GPUS

pytestmark = pytest.mark.visibility("hidden")

DTYPES = {torch.float32: 4, torch.bfloat16: 2, torch.float16: 2, torch.float64: 8}
ACTIVATION_FLOPS = {None: 0, "gelu": 20, "relu": 1}


@pytest.fixture(scope="session")
def cost(student):
    return student.module("gpu_kernels.cost")


@pytest.fixture
def rng(seed: int, request: pytest.FixtureRequest) -> random.Random:
    """This test's random source: the run's seed and the test's id."""
    return random.Random(f"{seed}/{request.node.nodeid}")


def size(rng: random.Random, big: bool = False) -> int:
    return rng.choice((rng.randint(1, 300), rng.randint(1, 10**4), rng.randint(10**5, 10**6) if big else 4096))


def check_pair(got, expected: tuple[int, int], context: str) -> None:
    assert type(got) is tuple and len(got) == 2 and all(type(v) is int for v in got), \
        f"{context}: expected a tuple of two ints (flops, bytes), got {got!r}"
    assert got == expected, f"{context}: expected (flops, bytes) = {expected}, got {got}"


@pytest.mark.points(1)
@pytest.mark.task("cost.elementwise_cost")
def test_elementwise_cost_at_random_sizes_dtypes_and_flop_counts(cost, rng):
    """For 12 random element counts (up to 10¹²), dtypes and FLOPs per element (0 to 50, and the default
    GeLU's 20): numel·flops_per_element FLOPs and 2·numel·element size bytes, exact ints."""
    for _ in range(12):
        numel, dtype = size(rng, big=True) * size(rng, big=True), rng.choice(list(DTYPES))
        if rng.random() < 0.3:
            check_pair(cost.elementwise_cost(numel, dtype), (20 * numel, 2 * numel * DTYPES[dtype]),
                       f"elementwise_cost({numel}, {dtype})")
            continue
        per = rng.randint(0, 50)
        check_pair(cost.elementwise_cost(numel, dtype, flops_per_element=per), (per * numel, 2 * numel * DTYPES[dtype]),
                   f"elementwise_cost({numel}, {dtype}, flops_per_element={per})")


@pytest.mark.points(1)
@pytest.mark.task("cost.softmax_cost")
def test_softmax_cost_at_random_shapes_dtypes_and_passes(cost, rng):
    """For 12 random (rows, cols), dtypes and 1 to 3 passes: 5 FLOPs per element whatever the passes,
    (passes + 1)·rows·cols·element size bytes."""
    for _ in range(12):
        rows, cols, dtype, passes = size(rng, big=True), size(rng, big=True), rng.choice(list(DTYPES)), rng.randint(1, 3)
        check_pair(cost.softmax_cost(rows, cols, dtype, passes=passes),
                   (5 * rows * cols, (passes + 1) * rows * cols * DTYPES[dtype]),
                   f"softmax_cost({rows}, {cols}, {dtype}, passes={passes})")


@pytest.mark.points(2)
@pytest.mark.task("cost.matmul_cost")
def test_matmul_cost_at_random_sizes_with_random_epilogues(cost, rng):
    """For 16 random (m, n, k) up to 10⁶ (non-square, odd), dtypes, with or without bias and with each
    activation: 2mnk + (bias + activation FLOPs)·mn FLOPs; (mk + kn + mn [+ n])·element size bytes."""
    for case in range(16):
        m, n, k = size(rng, big=True), size(rng, big=True), size(rng, big=True)
        dtype, bias, activation = rng.choice(list(DTYPES)), case % 2 == 1, (None, "gelu", "relu")[case % 3]
        flops = 2 * m * n * k + (int(bias) + ACTIVATION_FLOPS[activation]) * m * n
        moved = (m * k + k * n + m * n + (n if bias else 0)) * DTYPES[dtype]
        got = cost.matmul_cost(m, n, k, dtype, bias=bias, activation=activation) if case else \
            cost.matmul_cost(m, n, k, dtype)
        check_pair(got, (flops, moved), f"matmul_cost({m}, {n}, {k}, {dtype}, bias={bias}, activation={activation!r})")


@pytest.mark.points(2)
@pytest.mark.task("cost.fusion_savings")
def test_fusion_savings_are_four_passes_over_the_output_at_random_sizes(cost, rng):
    """For 12 random (m, n, k) and dtypes: 4·m·n·element size bytes (the product written, read, written
    again with the bias, read by the GeLU), whatever k; an exact int."""
    for _ in range(12):
        m, n, k, dtype = size(rng, big=True), size(rng, big=True), size(rng), rng.choice(list(DTYPES))
        got = cost.fusion_savings(m, n, k, dtype)
        assert type(got) is int and got == 4 * m * n * DTYPES[dtype], \
            f"fusion_savings({m}, {n}, {k}, {dtype}): expected {4 * m * n * DTYPES[dtype]}, got {got!r}"


def tile_case(rng: random.Random) -> tuple[int, int, int, int]:
    tile_m, tile_n = rng.choice((16, 32, 64, 128, 256, rng.randint(1, 200))), rng.choice((32, 64, 128, rng.randint(1, 200)))
    m = rng.choice((tile_m * rng.randint(1, 40), tile_m * rng.randint(0, 40) + rng.randint(1, tile_m), rng.randint(1, 9000)))
    n = rng.choice((tile_n * rng.randint(1, 40), tile_n * rng.randint(0, 40) + rng.randint(1, tile_n), rng.randint(1, 9000)))
    return m, n, tile_m, tile_n


@pytest.mark.points(1)
@pytest.mark.task("cost.tiles")
def test_tiles_at_random_sizes_including_partial_tiles(cost, rng):
    """For 30 random outputs and tile shapes (multiples of the tile, one past a multiple, anything):
    ceil(m / tile_m)·ceil(n / tile_n), an int."""
    for _ in range(30):
        m, n, tile_m, tile_n = tile_case(rng)
        got = cost.tiles(m, n, tile_m, tile_n)
        expected = math.ceil(m / tile_m) * math.ceil(n / tile_n)
        assert type(got) is int and got == expected, f"tiles({m}, {n}, {tile_m}, {tile_n}): expected {expected}, got {got!r}"


@pytest.mark.points(2)
@pytest.mark.task("cost.waves")
def test_waves_on_the_sm_counts_of_the_hardware_table(cost, rng):
    """On each GPU of the table (108, 132, 132, 148 SMs), random multiples of its SM count in 128 × 128 tiles
    take exactly that many waves, and one tile more takes one wave more."""
    for device in GPUS:
        sms, rounds = device.num_sms, rng.randint(1, 5)
        rows = rng.choice([d for d in range(1, sms + 1) if sms % d == 0])
        cols = rounds * sms // rows
        m, n = rows * 128, cols * 128
        assert cost.tiles(m, n, 128, 128) == rounds * sms
        got = cost.waves(m, n, 128, 128, sms)
        assert type(got) is int and got == rounds, f"{device.name}: {rounds * sms} tiles on {sms} SMs gave {got!r} waves"
        more = cost.waves(m, n + 1, 128, 128, sms)  # one more column of rows tiles
        assert more == rounds + 1, f"{device.name}: {rounds * sms + rows} tiles on {sms} SMs gave {more!r} waves"


@pytest.mark.points(1)
@pytest.mark.task("cost.waves")
def test_waves_at_random_sizes_and_sm_counts(cost, rng):
    """For 30 random outputs, tiles and SM counts (1 to 200): ceil(tiles / num_sms)."""
    for _ in range(30):
        m, n, tile_m, tile_n = tile_case(rng)
        sms = rng.choice((rng.randint(1, 200), *(g.num_sms for g in GPUS)))
        expected = math.ceil(math.ceil(m / tile_m) * math.ceil(n / tile_n) / sms)
        got = cost.waves(m, n, tile_m, tile_n, sms)
        assert type(got) is int and got == expected, \
            f"waves({m}, {n}, {tile_m}, {tile_n}, {sms}): expected {expected}, got {got!r}"


@pytest.mark.points(2)
@pytest.mark.task("cost.tile_efficiency")
def test_tile_efficiency_at_random_sizes_and_sm_counts(cost, rng):
    """For 30 random cases: m·n / (waves · num_sms · tile_m · tile_n), a float in (0, 1], within 1e-12."""
    for _ in range(30):
        m, n, tile_m, tile_n = tile_case(rng)
        sms = rng.choice((rng.randint(1, 200), *(g.num_sms for g in GPUS)))
        count = math.ceil(m / tile_m) * math.ceil(n / tile_n)
        expected = m * n / (math.ceil(count / sms) * sms * tile_m * tile_n)
        got = cost.tile_efficiency(m, n, tile_m, tile_n, sms)
        assert type(got) is float and got == pytest.approx(expected, rel=1e-12), \
            f"tile_efficiency({m}, {n}, {tile_m}, {tile_n}, {sms}): expected {expected:.12g}, got {got!r}"


@pytest.mark.points(1)
@pytest.mark.task("cost.tile_efficiency")
def test_growing_the_output_to_fill_the_last_wave_raises_the_efficiency(cost, rng):
    """On an H100 (132 SMs) in 128 × 128 tiles: an output one tile past a full wave has efficiency under
    0.51; growing it to fill the second wave doubles the work for the same two waves (efficiency 1)."""
    sms = 132
    rows = rng.choice((1, 2, 3, 4, 6, 11, 12))
    cols = sms // rows
    m, n = rows * 128, cols * 128
    past = cost.tile_efficiency(m, n + 1, 128, 128, sms)
    full = cost.tile_efficiency(m, 2 * n, 128, 128, sms)
    assert type(past) is float and past == pytest.approx(m * (n + 1) / (2 * sms * 128 * 128), rel=1e-12), \
        f"({m}, {n + 1}): got {past!r}"
    assert type(full) is float and full == pytest.approx(1.0, rel=1e-12), f"({m}, {2 * n}): got {full!r}"


INVALID = [
    ("elementwise_cost", (-5, torch.float32), {}, "numel"),
    ("elementwise_cost", (5, torch.float32), {"flops_per_element": -1}, "flops_per_element"),
    ("elementwise_cost", (5.0, torch.float32), {}, "numel"),
    ("softmax_cost", (0, 8, torch.float16), {}, "rows"),
    ("softmax_cost", (3, 8, torch.int64), {}, "dtype"),
    ("matmul_cost", (3, 0, 4, torch.float32), {}, "n"),
    ("matmul_cost", (3, 4, 4, torch.float32), {"activation": "GELU"}, "activation"),
    ("matmul_cost", (3, 4, 4, "bf16"), {}, "dtype"),
    ("fusion_savings", (3, 4, -1, torch.bfloat16), {}, "k"),
    ("tiles", (0, 4, 2, 2), {}, "m"),
    ("tiles", (4, 4, 2, -2), {}, "tile_n"),
    ("waves", (4, 4, 2, 2, -132), {}, "num_sms"),
    ("tile_efficiency", (4, 4, 2, 2, 0), {}, "num_sms"),
    ("tile_efficiency", (4, True, 2, 2, 1), {}, "n"),
]


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.parametrize("function, args, kwargs, name", [
    pytest.param(*case, marks=pytest.mark.task(f"cost.{case[0]}"), id=f"{case[0]}-{case[3]}-{i}")
    for i, case in enumerate(INVALID)])
def test_cost_functions_reject_invalid_arguments(cost, function, args, kwargs, name):
    """Sizes, tiles, SM counts below 1 or not ints (bools and floats included), negative FLOPs per element,
    non-floating dtypes and unknown activations raise ValueError naming the argument."""
    with pytest.raises(ValueError, match=rf"\b{name}\b"):  # the name as a word, not a letter of one
        getattr(cost, function)(*args, **kwargs)
