"""Hidden tests of §1 memory accounting: random dtypes, shapes, views, magnitudes and sizes.

Expected values come from torch itself (numel, element_size, finfo, a float64 cast) or closed forms.
"""

import math
import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.suites.resource_accounting import scenarios

pytestmark = pytest.mark.visibility("hidden")

FORMATS = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
SMALL_DTYPES = ("float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8", "int16",
                "int32", "int64", "uint8", "bool", "complex64", "complex128")


def expected_bytes(spec: dict) -> int:
    """numel × element_size of the same view, built here on the meta device (nothing allocated)."""
    view = scenarios.tensor_view(**{**spec, "device": "meta"})
    return view.numel() * view.element_size()


def random_view(rng: random.Random, device: str, max_side: int) -> dict:
    view = rng.choice(scenarios.VIEWS)
    rank = rng.randint(2, 4)
    shape = [rng.randint(2, max_side) for _ in range(rank)]
    return {"shape": shape, "dtype": rng.choice(SMALL_DTYPES), "device": device, "view": view}


@pytest.mark.points(2)
@pytest.mark.task("memory.get_memory_usage")
def test_memory_usage_is_numel_times_element_size_for_random_views_and_dtypes(student, rng):
    """get_memory_usage of 12 random CPU tensors (14 dtypes, complex and float8 included) seen through
    transposes, permutes, slices with a step, narrows, selects, expands and diagonals is numel × element_size
    of the view (not of its storage), an int."""
    specs = [random_view(rng, "cpu", 7) for _ in range(12)]
    got = student.run(scenarios.memory_of_views, specs=specs)
    assert type(got) is list and len(got) == len(specs), f"malformed result {got!r}"
    for spec, value in zip(specs, got):
        assert type(value) is int, f"{spec}: expected an int, got {type(value).__name__}"
        assert value == expected_bytes(spec), f"{spec}: got {value} bytes, expected {expected_bytes(spec)}"


@pytest.mark.edge
@pytest.mark.points(1.5)
@pytest.mark.task("memory.get_memory_usage")
def test_memory_usage_of_huge_meta_tensors_is_exact(student, rng):
    """get_memory_usage of 8 random meta tensors of up to ~10¹² bytes (far beyond the worker's memory, some
    beyond 2³¹ elements), some through views, is the exact int numel × element_size."""
    specs = []
    for _ in range(8):
        shape = [rng.randint(2_000, 120_000), rng.randint(2_000, 120_000)] + [rng.randint(2, 9)] * rng.randint(0, 1)
        specs.append({"shape": shape, "dtype": rng.choice(SMALL_DTYPES), "device": "meta",
                      "view": rng.choice(("none", "transpose", "slice", "expand"))})
    got = student.run(scenarios.memory_of_views, specs=specs)
    assert type(got) is list and len(got) == len(specs), f"malformed result {got!r}"
    for spec, value in zip(specs, got):
        assert type(value) is int and value == expected_bytes(spec), \
            f"{spec}: got {value!r}, expected {expected_bytes(spec)} (an int)"


def finfo_format(dtype: torch.dtype) -> tuple[int, int, int]:
    """(sign, exponent, mantissa) bits derived from torch.finfo alone.

    eps = 2^-mantissa; the smallest normal is 2^(2 - 2^(exponent - 1)) (bias 2^(e-1) - 1, for every
    format here, e4m3fn included: it gives up infinities, not exponents).
    """
    info = torch.finfo(dtype)
    mantissa = round(-math.log2(info.eps))
    exponent = round(math.log2(2 - math.log2(info.smallest_normal))) + 1
    return 1, exponent, mantissa


@pytest.mark.points(1.5)
@pytest.mark.task("memory.float_format")
def test_float_format_agrees_with_torch_finfo_and_has_named_fields(student, rng):
    """For each of the five formats (in random order) float_format gives ints (sign, exponent, mantissa) equal
    to what torch.finfo implies (eps = 2^-mantissa, smallest normal 2^(2 - 2^(e-1)), 1 + e + m = bits),
    readable by name as .sign_bits, .exponent_bits and .mantissa_bits."""
    for name in rng.sample(FORMATS, len(FORMATS)):
        dtype = getattr(torch, name)
        expected = finfo_format(dtype)
        assert sum(expected) == torch.finfo(dtype).bits
        got = student.run(scenarios.float_format_by_name, dtype=name)
        assert type(got["tuple"]) is tuple and all(type(b) is int for b in got["tuple"]), f"{name}: {got['tuple']!r}"
        assert got["tuple"] == expected, f"{name}: got {got['tuple']}, expected {expected}"
        assert got["by_name"] == list(expected), f"{name}: fields by name are {got['by_name']}, expected {expected}"


WIRE_OTHERS = (torch.float64, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)
LOCAL_OTHERS = tuple(name for name in ("complex64", "complex128", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                       "float8_e8m0fnu", "uint16", "uint32", "complex32")
                     if hasattr(torch, name))
# Floating-point dtypes outside the five: `dtype.is_floating_point` (and torch.finfo) accept them, so a check
# by kind instead of by the list lets them through.
FLOAT_OTHERS = tuple(name for name in LOCAL_OTHERS if name.startswith("float8"))


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("memory.float_format")
def test_float_format_raises_type_error_for_random_other_dtypes(memory, student, rng):
    """float_format raises TypeError for dtypes outside the five formats: three random ones among float64 and the
    integer dtypes, one of the other float8 variants (fnuz, e8m0: floating point, and torch.finfo knows them too)
    and one random among the rest of those and the complex and wider unsigned dtypes."""
    for dtype in rng.sample(WIRE_OTHERS, 3):
        with pytest.raises(TypeError):
            memory.float_format(dtype)
            pytest.fail(f"no TypeError for {dtype}")
    float8 = rng.choice(FLOAT_OTHERS)
    for name in (float8, rng.choice([name for name in LOCAL_OTHERS if name != float8])):
        with pytest.raises(TypeError):
            student.run(scenarios.float_format_of, dtype=name)
            pytest.fail(f"no TypeError for torch.{name}")


def cast_underflows(value: float, dtype: torch.dtype) -> bool:
    """The definition: a nonzero value that a float64 -> dtype cast turns into 0 (or -0)."""
    return value != 0 and torch.tensor(value, dtype=torch.float64).to(dtype).item() == 0


def smallest_subnormal(dtype: torch.dtype) -> float:
    info = torch.finfo(dtype)
    return info.smallest_normal * info.eps


def rounds_once_to_zero(value: float, dtype: torch.dtype) -> bool:
    """The handout's rule applied to the exact value: round to nearest even, so a nonzero value underflows
    when it is at most half the smallest subnormal (the tie goes to 0, the even neighbour)."""
    return value != 0 and abs(value) <= smallest_subnormal(dtype) / 2


def allowed_answers(value: float, dtype: torch.dtype) -> set[bool]:
    """What underflows_to_zero may return: the cast's answer, and the single rounding's. They differ only
    a hair above half the smallest subnormal of bfloat16, float16 and both fp8 formats, where torch's cast
    from float64 goes through float32 and rounds twice (to exactly half, then to even, 0): 2⁻²⁵·(1 + 2⁻³⁰)
    becomes 0 in float16, while one rounding gives 2⁻²⁴."""
    return {cast_underflows(value, dtype), rounds_once_to_zero(value, dtype)}


@pytest.mark.points(3)
@pytest.mark.task("memory.underflows_to_zero")
def test_underflows_to_zero_agrees_with_torch_casts_at_random_magnitudes(memory, explore):
    """For 60 random (format, value) pairs, both signs, magnitudes from 2⁻¹² to 2⁴ times the format's smallest
    subnormal, underflows_to_zero(value, dtype) is the bool `value != 0 and float64 -> dtype cast == 0` (or, where
    that cast rounds twice, the single rounding's answer: see allowed_answers)."""

    @explore(60)
    @given(name=st.sampled_from(FORMATS), log2=st.floats(-12, 4), negative=st.booleans())
    def check(name, log2, negative):
        dtype = getattr(torch, name)
        value = (-1 if negative else 1) * smallest_subnormal(dtype) * 2.0**log2
        got = memory.underflows_to_zero(value, dtype)
        assert type(got) is bool, f"expected a bool, got {type(got).__name__}"
        assert got in allowed_answers(value, dtype), f"underflows_to_zero({value!r}, {dtype}) returned {got}"

    check()


@pytest.mark.points(2)
@pytest.mark.task("memory.underflows_to_zero")
def test_underflows_to_zero_rounds_to_nearest_at_the_subnormal_boundary(memory, student, rng):
    """Round to nearest, subnormals included: just below half the smallest subnormal a value underflows, just
    above it rounds up to the smallest subnormal and does not; just below the smallest normal it survives as a
    subnormal. Random offsets of 0.1% to 20%, each format, both signs; 0 itself never underflows."""
    for name in FORMATS:
        dtype = getattr(torch, name)
        tiny = smallest_subnormal(dtype)
        sign = rng.choice((-1, 1))
        cases = [sign * tiny / 2 * (1 - rng.uniform(1e-3, 0.2)), sign * tiny / 2 * (1 + rng.uniform(1e-3, 0.2)),
                 sign * torch.finfo(dtype).smallest_normal * (1 - rng.uniform(1e-3, 0.2)), 0.0]
        expected = [True, False, False, False]
        assert [cast_underflows(v, dtype) for v in cases] == expected  # the definition agrees
        got = [memory.underflows_to_zero(v, dtype) for v in cases]
        assert got == expected, f"{name}: for {cases} got {got}, expected {expected}"


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("memory.underflows_to_zero")
def test_underflows_to_zero_rejects_non_float_dtypes_and_non_finite_values(memory, rng):
    """TypeError for a random integer or bool dtype; ValueError for nan, inf or -inf (one drawn at random)."""
    dtype = rng.choice((torch.int8, torch.int32, torch.int64, torch.uint8, torch.bool))
    with pytest.raises(TypeError):
        memory.underflows_to_zero(rng.uniform(1e-9, 1e-3), dtype)
        pytest.fail(f"no TypeError for {dtype}")
    value = rng.choice((float("nan"), float("inf"), float("-inf")))
    with pytest.raises(ValueError):
        memory.underflows_to_zero(value, getattr(torch, rng.choice(FORMATS)))
        pytest.fail(f"no ValueError for {value}")


whole = st.one_of(st.integers(0, 10**15), st.integers(0, 10**6).map(lambda n: float(n * 10**6)))


@pytest.mark.points(1.5)
@pytest.mark.task("memory.training_state_bytes")
def test_training_state_bytes_at_random_sizes(memory, explore):
    """For 40 random parameter counts (ints up to 10¹⁵, whole floats such as 7e9) and per-parameter byte counts,
    training_state_bytes is the exact int N·(param + grad + optimizer)."""

    @explore(40)
    @given(n=whole, p=st.integers(0, 8), g=st.integers(0, 8), o=st.integers(0, 16))
    def check(n, p, g, o):
        got = memory.training_state_bytes(n, param_bytes=p, grad_bytes=g, optimizer_bytes=o)
        assert type(got) is int and got == int(n) * (p + g + o), f"({n}, {p}, {g}, {o}) gave {got!r}"

    check()


@pytest.mark.points(1.5)
@pytest.mark.task("memory.max_trainable_parameters")
def test_max_trainable_parameters_is_the_largest_count_that_fits(memory, explore):
    """For 40 random memory sizes and bytes per parameter, max_trainable_parameters is the exact int
    memory // bytes, the largest N with training_state_bytes(N) <= memory (checked with the closed form)."""

    @explore(40)
    @given(memory_bytes=whole, per=st.integers(1, 40))
    def check(memory_bytes, per):
        got = memory.max_trainable_parameters(memory_bytes, bytes_per_parameter=per)
        assert type(got) is int, f"expected an int, got {type(got).__name__}"
        assert got * per <= int(memory_bytes) < (got + 1) * per, f"({memory_bytes}, {per}) gave {got}"

    check()


NEGATIVE = {
    "training_state_bytes": (("num_parameters", 0), ("param_bytes", 1), ("grad_bytes", 2), ("optimizer_bytes", 3)),
    "max_trainable_parameters": (("memory_bytes", 0), ("bytes_per_parameter", 1)),
}


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.parametrize("function", [pytest.param(f, marks=pytest.mark.task(f"memory.{f}")) for f in NEGATIVE])
def test_memory_functions_reject_random_negative_sizes(memory, rng, function):
    """Each argument in turn set to a random negative number (and bytes_per_parameter to 0) raises ValueError
    whose message names that argument."""
    for name, position in NEGATIVE[function]:
        args = [rng.randint(1, 10**12)] + [rng.randint(1, 16) for _ in NEGATIVE[function][1:]]
        args[position] = 0 if name == "bytes_per_parameter" else -rng.randint(1, 10**9)
        with pytest.raises(ValueError, match=name):
            getattr(memory, function)(*args)
            pytest.fail(f"no ValueError for {function}{tuple(args)}")
