"""Hidden tests of §3 to §6: FlopCounter on random programs, the roofline and training compute at random figures.

FLOP counts are torch's own FlopCounterMode run here on the same program (the builders in scenarios.py
are shared), or closed forms; one test uses the reference FlopCounter for elementwise ops in a backward.
"""

import math
import random

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from autograder.suites.resource_accounting import scenarios
from kernels.hardware import GPUS

pytestmark = pytest.mark.visibility("hidden")

SECONDS_PER_DAY = 86400


# --- random programs ------------------------------------------------------------------------------------

def matmul_op(rng: random.Random, kind: str) -> dict:
    m, n, p = rng.randint(1, 7), rng.randint(1, 7), rng.randint(1, 7)
    lead = [rng.randint(1, 4) for _ in range(rng.randint(1, 2) if kind in ("matmul", "einsum", "linear") else 1)]
    if kind in ("matmul", "linear") and rng.random() < 0.3:
        lead = []
    bias = {"addmm": ("row", "full"), "baddbmm": ("row", "full", "batched"), "matmul": ("none", "batched"),
            "linear": ("none", "row")}.get(kind, ("none",))
    return {"kind": kind, "lead": lead, "m": m, "n": n, "p": p, "bias": rng.choice(bias),
            "grad": [rng.random() < 0.6, rng.random() < 0.6, rng.random() < 0.5],
            "alpha": rng.choice((1.0, 0.5)), "beta": rng.choice((1.0, 2.0))}


def matmul_spec(rng: random.Random, backward: bool) -> dict:
    kinds = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "einsum")
    ops = [matmul_op(rng, kind) for kind in rng.sample(kinds, rng.randint(3, 6))]
    if backward:
        ops[0]["grad"][0] = True
    return {"seed": rng.randrange(2**31), "ops": ops, "backward": backward}


def mlp_spec(rng: random.Random) -> dict:
    depth = rng.randint(1, 4)
    return {"seed": rng.randrange(2**31), "dims": [rng.randint(1, 12) for _ in range(depth + 1)],
            "bias": [rng.random() < 0.7 for _ in range(depth)], "activation": rng.choice(list(scenarios.ACTIVATIONS)),
            "lead": [rng.randint(1, 5) for _ in range(rng.randint(1, 3))], "input_grad": rng.random() < 0.5}


def attention_spec(rng: random.Random) -> dict:
    return {"seed": rng.randrange(2**31), "lead": [rng.randint(1, 3) for _ in range(rng.randint(0, 2))],
            "seq": rng.randint(2, 6), "heads": rng.randint(1, 3), "head_dim": rng.randint(1, 4),
            "bias": rng.random() < 0.5, "input_grad": rng.random() < 0.5}


def broadcast_pair(rng: random.Random) -> tuple[list[int], list[int], int]:
    """Two random broadcastable shapes and the number of elements of their broadcast."""
    shape = [rng.randint(1, 5) for _ in range(rng.randint(1, 3))]
    a = [s if rng.random() < 0.7 else 1 for s in shape]
    b = [s if rng.random() < 0.7 else 1 for s in shape][rng.randint(0, len(shape) - 1):]
    return a, b, math.prod(torch.broadcast_shapes(a, b))


def elementwise_spec(rng: random.Random, inplace: bool) -> tuple[dict, dict]:
    """A random elementwise mix and what count_elementwise=True must give for it (closed form)."""
    ops, expected = [], {}
    for _ in range(rng.randint(5, 9)):
        name = rng.choice(("add", "sub", "mul", "div"))
        form = rng.choice(("operator", "function", "alias", "scalar", "other") + (("inplace",) * 2 if inplace else ()))
        a, b, out = broadcast_pair(rng)
        if form == "scalar":
            out = math.prod(a)
        if form == "inplace":
            a = list(torch.broadcast_shapes(a, b))
        if form == "other":
            name = rng.choice(scenarios.UNCOUNTED)
        ops.append({"op": name, "form": form, "a": a, "b": b, "scalar": rng.choice((2.5, -1.0, 3))})
        if form not in ("inplace", "other"):
            expected[f"aten.{name}"] = expected.get(f"aten.{name}", 0) + out
    for name in scenarios.UNCOUNTED:  # each uncounted op in every mix, wherever it falls: never left to chance
        a, b, _ = broadcast_pair(rng)
        ops.insert(rng.randint(0, len(ops)), {"op": name, "form": "other", "a": a, "b": b, "scalar": 0})
    m, n, p = rng.randint(1, 6), rng.randint(1, 6), rng.randint(1, 6)
    ops.append({"op": "mm", "form": "matmul", "a": [m, n], "b": [n, p], "scalar": 0})
    expected["aten.mm"] = 2 * m * n * p
    return {"seed": rng.randrange(2**31), "ops": ops}, {"by_op": expected, "total": sum(expected.values())}


# --- matmul_flops ---------------------------------------------------------------------------------------

@pytest.mark.points(1)
@pytest.mark.task("flops.matmul_flops")
def test_matmul_flops_is_exact_2mnp_at_random_sizes(flops, explore):
    """For 40 random sizes (ints up to 10⁷, whole floats) matmul_flops is the exact int 2·m·n·p."""
    size = st.one_of(st.integers(1, 10**7), st.integers(1, 10**4).map(float))

    @explore(40)
    @given(m=size, n=size, p=size)
    def check(m, n, p):
        got = flops.matmul_flops(m, n, p)
        assert type(got) is int and got == 2 * int(m) * int(n) * int(p), f"matmul_flops({m}, {n}, {p}) gave {got!r}"

    check()


# --- FlopCounter ----------------------------------------------------------------------------------------

@pytest.mark.points(4)
@pytest.mark.task("flops.FlopCounter")
def test_flop_counter_matches_flop_counter_mode_on_random_matmul_mixes(student, trusted, rng):
    """On 3 random mixes of mm, addmm (bias, alpha, beta), bmm, baddbmm, batched matmul, F.linear and einsum
    with random sizes, leading dims and requires_grad flags, forward then (randomly) backward, FlopCounter's
    total and per-op counts equal FlopCounterMode's on the same program."""
    for backward in (True, rng.random() < 0.5, True):
        spec = matmul_spec(rng, backward)
        expected = trusted.mode_counts(scenarios.program("matmul", spec))
        got = student.run(scenarios.count_program, kind="matmul", spec=spec)
        trusted.assert_counts(got, expected, f"matmul mix {spec}")


@pytest.mark.points(3)
@pytest.mark.task("flops.FlopCounter")
def test_flop_counter_matches_flop_counter_mode_on_random_mlps(student, trusted, rng):
    """On 3 random MLPs (1 to 4 Linear layers, random widths, biases and activation, 1 to 3 leading dims,
    input with or without grad), forward and backward of the sum: FlopCounter equals FlopCounterMode."""
    for _ in range(3):
        spec = mlp_spec(rng)
        expected = trusted.mode_counts(scenarios.program("mlp", spec))
        trusted.assert_counts(student.run(scenarios.count_program, kind="mlp", spec=spec), expected, f"MLP {spec}")


@pytest.mark.points(2)
@pytest.mark.task("flops.FlopCounter")
def test_flop_counter_matches_flop_counter_mode_on_random_attention_layers(student, trusted, rng):
    """On 2 random multi-head attention layers (projections, q kᵀ and softmax · v as batched matmuls),
    forward and backward: FlopCounter equals FlopCounterMode (aten.bmm counts batch × 2·m·n·p)."""
    for _ in range(2):
        spec = attention_spec(rng)
        expected = trusted.mode_counts(scenarios.program("attention", spec))
        got = student.run(scenarios.count_program, kind="attention", spec=spec)
        trusted.assert_counts(got, expected, f"attention {spec}")


@pytest.mark.points(2)
@pytest.mark.task("flops.FlopCounter")
def test_flop_counter_counts_random_elementwise_ops_per_output_element(student, trusted, rng):
    """With count_elementwise=True, on 2 random mixes of add, sub, mul and div (operators, functions with alpha,
    aliases, tensor-scalar, random broadcasts) beside uncounted ops (exp, neg, relu, sum, rsub and addcmul, each
    in every mix) and one matmul, each op counts the elements of its broadcast output, keyed "aten.add" ..., and
    the matmul 2·m·n·p."""
    for _ in range(2):
        spec, expected = elementwise_spec(rng, inplace=False)
        got = student.run(scenarios.count_program, kind="elementwise", spec=spec, count_elementwise=True)
        trusted.assert_counts(got, expected, f"elementwise mix {spec}")


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("flops.FlopCounter")
def test_flop_counter_ignores_random_elementwise_ops_by_default(student, trusted, rng):
    """By default, on a random elementwise mix with one matmul, FlopCounter counts the matmul alone, as
    FlopCounterMode does."""
    spec, _ = elementwise_spec(rng, inplace=True)
    expected = trusted.mode_counts(scenarios.program("elementwise", spec))
    trusted.assert_counts(student.run(scenarios.count_program, kind="elementwise", spec=spec), expected,
                          f"elementwise mix {spec}")


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.visibility("after_due_date")
@pytest.mark.task("flops.FlopCounter")
def test_flop_counter_does_not_count_in_place_elementwise_ops(student, trusted, rng):
    """With count_elementwise=True, in-place add_, sub_, mul_ and div_ (other overload packets) are not counted,
    while the out-of-place ops of the same random mix are."""
    spec, expected = elementwise_spec(rng, inplace=True)
    got = student.run(scenarios.count_program, kind="elementwise", spec=spec, count_elementwise=True)
    trusted.assert_counts(got, expected, f"elementwise mix with in-place ops {spec}")


@pytest.mark.points(2)
@pytest.mark.task("flops.FlopCounter")
def test_flop_counter_counts_elementwise_ops_of_the_backward_like_the_reference(student, reference, trusted, rng):
    """With count_elementwise=True, on a random stack of (h @ W) * gate + bias, h / 2 - mean layers, forward
    and backward (where autograd runs its own mul, div and add), FlopCounter's counts equal the reference's."""
    spec = {"seed": rng.randrange(2**31), "rows": rng.randint(1, 6), "dim": rng.randint(1, 6),
            "layers": rng.randint(1, 3), "input_grad": rng.random() < 0.5}
    counter = reference.module("resource_accounting.flops").FlopCounter(count_elementwise=True)
    run = scenarios.program("scaled_residual", spec)
    with counter:
        run()
    expected = {"total": counter.total_flops, "by_op": dict(counter.flops_by_op)}
    got = student.run(scenarios.count_program, kind="scaled_residual", spec=spec, count_elementwise=True)
    trusted.assert_counts(got, expected, f"scaled residual stack {spec}")


@pytest.mark.edge
@pytest.mark.points(1.5)
@pytest.mark.task("flops.FlopCounter")
def test_each_flop_counter_counts_only_its_own_block(student, trusted, rng):
    """Two FlopCounters used one after the other on two random programs, with a third program run outside both
    (before and after the second): each counter holds exactly its own program's counts (no shared state, nothing
    counted outside the `with` block)."""
    first, second, between = (["mlp", mlp_spec(rng)], ["matmul", matmul_spec(rng, True)],
                              ["attention", attention_spec(rng)])
    got = student.run(scenarios.count_two_programs, first=first, second=second, between=between)
    assert type(got) is dict and set(got) == {"first", "second"}, f"malformed result {got!r}"
    trusted.assert_counts(got["first"], trusted.mode_counts(scenarios.program(*first)), f"first counter, {first}")
    trusted.assert_counts(got["second"], trusted.mode_counts(scenarios.program(*second)), f"second counter, {second}")


@pytest.mark.points(1)
@pytest.mark.gpu
@pytest.mark.task("flops.FlopCounter")
def test_flop_counter_counts_cuda_programs_like_flop_counter_mode(student, trusted, rng):
    """On a random MLP and a random attention layer run on the GPU, FlopCounter equals FlopCounterMode."""
    for kind, spec in (("mlp", mlp_spec(rng)), ("attention", attention_spec(rng))):
        with torch.device("cuda"):
            expected = trusted.mode_counts(scenarios.program(kind, spec))
        got = student.run(scenarios.count_program_on, kind=kind, spec=spec, device="cuda")
        trusted.assert_counts(got, expected, f"{kind} on cuda {spec}")


# --- roofline -------------------------------------------------------------------------------------------

positive = st.floats(1e-3, 1e18, allow_nan=False, allow_infinity=False)
rate = st.floats(1e6, 1e16, allow_nan=False, allow_infinity=False)


@pytest.mark.points(1)
@pytest.mark.task("flops.arithmetic_intensity")
def test_arithmetic_intensity_is_flops_over_bytes_at_random_figures(flops, explore):
    """For 30 random FLOP and byte counts (ints or floats, 0 FLOPs included) the intensity is the float
    flops / bytes."""

    @explore(30)
    @given(f=st.one_of(positive, st.integers(0, 10**15)), b=st.one_of(positive, st.integers(1, 10**15)))
    def check(f, b):
        got = flops.arithmetic_intensity(f, b)
        assert type(got) is float and got == pytest.approx(f / b, rel=1e-12), f"({f}, {b}) gave {got!r}"

    check()


@pytest.mark.points(1.5)
@pytest.mark.task("flops.matmul_arithmetic_intensity")
def test_matmul_arithmetic_intensity_at_random_sizes_and_element_widths(flops, explore):
    """For 30 random (m, n, p) and element widths (0.5 for fp4 up to 8 bytes) the intensity is the float
    2mnp / ((mn + np + mp) · bytes)."""

    @explore(30)
    @given(m=st.integers(1, 10**5), n=st.integers(1, 10**5), p=st.integers(1, 10**5),
           width=st.sampled_from((0.5, 1, 2, 4, 8, 1.5)))
    def check(m, n, p, width):
        got = flops.matmul_arithmetic_intensity(m, n, p, width)
        expected = 2 * m * n * p / ((m * n + n * p + m * p) * width)
        assert type(got) is float and got == pytest.approx(expected, rel=1e-12), \
            f"({m}, {n}, {p}, {width}) gave {got!r}"

    check()


@pytest.mark.points(1)
@pytest.mark.task("flops.ridge_point")
def test_ridge_point_is_peak_over_bandwidth_at_random_figures(flops, explore):
    """For 30 random peaks and bandwidths the ridge point is the float peak / bandwidth."""

    @explore(30)
    @given(peak=rate, bandwidth=rate)
    def check(peak, bandwidth):
        got = flops.ridge_point(peak, bandwidth)
        assert type(got) is float and got == pytest.approx(peak / bandwidth, rel=1e-12), \
            f"({peak}, {bandwidth}) gave {got!r}"

    check()


@pytest.mark.points(1.5)
@pytest.mark.task("flops.attainable_flops_per_sec")
def test_attainable_flops_follow_the_roofline_at_random_figures(flops, explore):
    """For 40 random intensities, peaks and bandwidths (both sides of the ridge) the attainable rate is the
    float min(peak, intensity × bandwidth)."""

    @explore(40)
    @given(peak=rate, bandwidth=rate, ratio=st.floats(1e-4, 1e4))
    def check(peak, bandwidth, ratio):
        intensity = ratio * peak / bandwidth
        got = flops.attainable_flops_per_sec(intensity, peak, bandwidth)
        expected = min(peak, intensity * bandwidth)
        assert type(got) is float and got == pytest.approx(expected, rel=1e-12), \
            f"({intensity}, {peak}, {bandwidth}) gave {got!r}, expected {expected}"

    check()


@pytest.mark.points(1.5)
@pytest.mark.task("flops.is_compute_bound")
def test_is_compute_bound_compares_with_the_ridge_at_random_figures(flops, explore):
    """For 40 random figures: a bool, True at or above peak / bandwidth and False below it; exactly at the
    ridge (figures chosen so that peak / bandwidth is exact in binary) it is True."""

    @explore(40)
    @given(peak_mantissa=st.integers(1, 2**20), peak_exp=st.integers(20, 30), bw_exp=st.integers(20, 30),
           where=st.sampled_from(("below", "at", "above")), ratio=st.floats(1e-3, 0.999))
    def check(peak_mantissa, peak_exp, bw_exp, where, ratio):
        peak, bandwidth = float(peak_mantissa * 2**peak_exp), float(2**bw_exp)
        ridge = peak / bandwidth
        intensity = {"below": ridge * ratio, "at": ridge, "above": ridge / ratio}[where]
        got = flops.is_compute_bound(intensity, peak, bandwidth)
        assert got is (where != "below"), \
            f"is_compute_bound({intensity}, {peak}, {bandwidth}) gave {got!r} ({where} the ridge)"

    check()


# --- training compute ------------------------------------------------------------------------------------

# Parameter and token counts: ints, or floats holding a whole number (`70e9`), as the handout's conventions
# promise counts; a solution may check them as counts (the stubs' _count) or as numbers.
count = st.one_of(st.integers(1, 10**13), st.floats(1e6, 1e14).map(lambda x: float(math.floor(x))))


@pytest.mark.points(1)
@pytest.mark.task("flops.training_flops")
def test_training_flops_are_6_n_t_at_random_sizes(flops, explore):
    """For 30 random parameter and token counts (ints or floats) training_flops is the float 6·N·T."""

    @explore(30)
    @given(n=count, t=count)
    def check(n, t):
        got = flops.training_flops(n, t)
        assert type(got) is float and got == pytest.approx(6 * n * t, rel=1e-12), f"({n}, {t}) gave {got!r}"

    check()


@pytest.mark.points(2)
@pytest.mark.task("flops.training_days")
def test_training_days_at_random_figures(flops, explore):
    """For 30 random models, token counts, GPU counts, peaks and MFUs in (0, 1] (1 included) training_days is the
    float 6·N·T / (gpus · peak · mfu) / 86400."""

    @explore(30)
    @given(n=count, t=count, gpus=st.integers(1, 100_000), peak=rate, mfu=st.one_of(st.floats(0.01, 1.0), st.just(1.0)))
    def check(n, t, gpus, peak, mfu):
        got = flops.training_days(n, t, gpus, peak, mfu)
        expected = 6 * n * t / (gpus * peak * mfu) / SECONDS_PER_DAY
        assert type(got) is float and got == pytest.approx(expected, rel=1e-9), \
            f"training_days({n}, {t}, {gpus}, {peak}, {mfu}) gave {got!r}, expected {expected}"

    check()


@pytest.mark.points(1.5)
@pytest.mark.task("flops.mfu")
def test_mfu_is_achieved_rate_over_peak_and_inverts_training_days(flops, explore):
    """For 25 random runs: mfu(flops, seconds, peak) is the float flops / seconds / peak, and measuring a run that
    took training_days(N, T, g, peak, u) days gives back u: mfu(6NT, days · 86400, g · peak) ≈ u."""

    @explore(25)
    @given(n=count, t=count, gpus=st.integers(1, 10_000), peak=rate, u=st.floats(0.01, 1.0))
    def check(n, t, gpus, peak, u):
        work, seconds = 6.0 * n * t, 6.0 * n * t / (gpus * peak * u)
        got = flops.mfu(work, seconds, gpus * peak)
        assert type(got) is float and got == pytest.approx(work / seconds / (gpus * peak), rel=1e-9)
        days = flops.training_days(n, t, gpus, peak, u)
        again = flops.mfu(work, days * SECONDS_PER_DAY, gpus * peak)
        assert type(again) is float and again == pytest.approx(u, rel=1e-9)

    check()


# --- decode and prefill -----------------------------------------------------------------------------------

@pytest.mark.points(1.5)
@pytest.mark.task("flops.decode_arithmetic_intensity")
def test_decode_and_prefill_intensities_at_random_figures(flops, explore):
    """For 30 random row counts, widths and element sizes, both are the float 2·R·D² / ((D² + 2·R·D) · bytes)."""

    @explore(30)
    @given(rows=st.integers(1, 10**5), d_model=st.integers(1, 32768), width=st.sampled_from((1, 2, 4, 0.5)))
    def check(rows, d_model, width):
        expected = 2 * rows * d_model**2 / ((d_model**2 + 2 * rows * d_model) * width)
        for name in ("decode_arithmetic_intensity", "prefill_arithmetic_intensity"):
            got = getattr(flops, name)(rows, d_model, width)
            assert type(got) is float and got == pytest.approx(expected, rel=1e-12), \
                f"{name}({rows}, {d_model}, {width}) gave {got!r}, expected {expected}"

    check()


@pytest.mark.points(1.5)
@pytest.mark.task("flops.prefill_arithmetic_intensity")
def test_decoding_is_memory_bound_and_prefill_compute_bound_on_every_gpu(flops, rng):
    """On each GPU of kernels/hardware.py in bf16, with a random d_model of 2048 to 16384: decoding a random batch
    of 1 to 16 sequences is below the ridge point and prefilling a random 4096 to 32768-token prompt is above it,
    both intensities being the weight matmul's (a constant below or above every ridge earns nothing)."""
    for gpu in GPUS:
        d_model, batch, tokens = rng.randint(2048, 16384), rng.randint(1, 16), rng.randint(4096, 32768)
        ridge = gpu.ridge_point()
        decode = flops.decode_arithmetic_intensity(batch, d_model, 2)
        prefill = flops.prefill_arithmetic_intensity(tokens, d_model, 2)
        for rows, got in ((batch, decode), (tokens, prefill)):
            expected = 2 * rows * d_model**2 / ((d_model**2 + 2 * rows * d_model) * 2)
            assert type(got) is float and got == pytest.approx(expected, rel=1e-12), \
                f"{rows} rows at d_model {d_model}: intensity {got!r}, expected {expected:.6g}"
        assert decode < ridge, f"{gpu.name}: decoding {batch} sequences at d_model {d_model}: {decode} >= ridge {ridge}"
        assert prefill > ridge, \
            f"{gpu.name}: prefilling {tokens} tokens at d_model {d_model}: {prefill} <= ridge {ridge}"


# --- invalid arguments ------------------------------------------------------------------------------------

def invalid_cases(rng: random.Random) -> dict:
    """For each function: (valid arguments, [(argument index, argument name, bad value), ...]) at random figures."""
    size, peak, bw = rng.randint(1, 4096), rng.uniform(1e12, 2e15), rng.uniform(1e11, 8e12)
    dim = rng.randint(0, 2)
    negative = -rng.uniform(1e-3, 1e6)

    def zero_or_negative():
        return rng.choice((0, negative))

    return {
        "matmul_flops": ((size, size, size), [(i, n, -rng.randint(1, 10**6)) for i, n in enumerate("mnp")]),
        "arithmetic_intensity": ((1e9, 1e6), [(0, "flops", negative), (1, "bytes_moved", rng.choice((0, negative)))]),
        "matmul_arithmetic_intensity": ((size, size, size, 2),
                                        [(dim, "mnp"[dim], rng.choice((0, -rng.randint(1, 99)))),
                                         (3, "bytes_per_element", rng.choice((0, negative)))]),
        "ridge_point": ((peak, bw), [(0, "peak", zero_or_negative()), (1, "bandwidth", zero_or_negative())]),
        "is_compute_bound": ((10.0, peak, bw), [(0, "intensity", negative), (1, "peak", rng.choice((0, negative))),
                                                (2, "bandwidth", rng.choice((0, negative)))]),
        "attainable_flops_per_sec": ((10.0, peak, bw), [(0, "intensity", negative), (1, "peak", zero_or_negative()),
                                                        (2, "bandwidth", zero_or_negative())]),
        "training_flops": ((7e9, 1e12), [(0, "num_parameters", negative), (1, "num_tokens", negative)]),
        "training_days": ((7e9, 1e12, 64, peak, 0.4),
                          [(2, "num_gpus", rng.choice((0, -rng.randint(1, 64)))), (3, "peak", zero_or_negative()),
                           (4, "mfu", rng.choice((0, negative, rng.uniform(1.001, 10))))]),
        "mfu": ((1e18, 100.0, peak), [(1, "seconds", zero_or_negative()), (2, "peak", zero_or_negative())]),
        "decode_arithmetic_intensity": ((8, 4096, 2), [(0, "batch_size", rng.choice((0, -rng.randint(1, 64)))),
                                                       (1, "d_model", -rng.randint(1, 8192))]),
        "prefill_arithmetic_intensity": ((4096, 4096, 2), [(0, "num_tokens", rng.choice((0, -rng.randint(1, 64)))),
                                                           (1, "d_model", rng.choice((0, -rng.randint(1, 8192))))]),
    }


FUNCTIONS = ("matmul_flops", "arithmetic_intensity", "matmul_arithmetic_intensity", "ridge_point", "is_compute_bound",
             "attainable_flops_per_sec", "training_flops", "training_days", "mfu", "decode_arithmetic_intensity",
             "prefill_arithmetic_intensity")


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.parametrize("function", [pytest.param(f, marks=pytest.mark.task(f"flops.{f}")) for f in FUNCTIONS])
def test_flops_functions_reject_random_invalid_arguments(flops, rng, function):
    """Each invalid argument in turn (random negative sizes and rates, zero rates and GPUs, an MFU of 0, negative
    or above 1) raises ValueError whose message names the argument."""
    valid, bad = invalid_cases(rng)[function]
    for index, name, value in bad:
        args = list(valid)
        args[index] = value
        with pytest.raises(ValueError, match=name):
            getattr(flops, function)(*args)
            pytest.fail(f"no ValueError for {function}{tuple(args)}")
