"""§1 Memory accounting: bytes of tensors, float formats, underflow, training state."""

import pytest
import torch

from tests.resource_accounting import scenarios

MiB = 2**20


@pytest.mark.points(1)
@pytest.mark.task("memory.get_memory_usage")
def test_float32_4x8_tensor_takes_128_bytes(memory):
    """torch.zeros(4, 8) in float32 takes 4·8 elements × 4 bytes = 128 bytes, returned as an int.

    Hint: numel() × element_size(); return a Python int.
    """
    got = memory.get_memory_usage(torch.zeros(4, 8))
    assert type(got) is int, f"expected an int, got {type(got).__name__}"
    assert got == 128


@pytest.mark.points(2.5)
@pytest.mark.task("memory.get_memory_usage")
def test_memory_usage_is_numel_times_element_size(memory):
    """get_memory_usage is numel × bytes per element for every dtype and shape, empty and 0-d included
    (one test: an empty tensor's 0 bytes count only together with the others)."""
    for shape, dtype in [((3, 5), torch.float16), ((7,), torch.bfloat16), ((2, 3, 4), torch.int64),
                         ((), torch.float32), ((0, 9), torch.float32)]:
        x = torch.zeros(shape, dtype=dtype)
        expected = torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
        got = memory.get_memory_usage(x)
        assert got == expected, f"shape {shape}, {dtype}: expected {expected} bytes, got {got!r}"


@pytest.mark.points(2)
@pytest.mark.task("memory.get_memory_usage")
def test_gpt3_ffn_matrix_takes_2304_mib_measured_on_a_meta_tensor(student):
    """The lecture's GPT-3 FFN matrix torch.empty(12288 * 4, 12288) in float32 is 2,415,919,104 bytes (2304 MiB).

    Measured on a meta tensor (shape and dtype, no storage), so nothing is allocated.
    Hint (raised): a meta tensor has no data to read: use numel() and element_size() alone, which work on meta
    tensors.
    Hint (values): numel() × element_size(), returned as a Python int.
    """
    got = student.run(scenarios.meta_tensor_memory, shape=[12288 * 4, 12288], dtype=torch.float32)
    assert type(got) is int
    assert got == 12288 * 4 * 12288 * 4 == 2_415_919_104 == 2304 * MiB


@pytest.mark.points(1)
@pytest.mark.task("memory.float_format")
@pytest.mark.parametrize("dtype, bits", [
    (torch.float32, (1, 8, 23)), (torch.float16, (1, 5, 10)), (torch.bfloat16, (1, 8, 7)),
    (torch.float8_e4m3fn, (1, 4, 3)), (torch.float8_e5m2, (1, 5, 2)),
], ids=lambda value: str(value).removeprefix("torch.") if isinstance(value, torch.dtype) else "-".join(map(str, value)))
def test_float_format_gives_sign_exponent_mantissa_bits(memory, dtype, bits):
    """float_format(dtype) is (sign_bits, exponent_bits, mantissa_bits) as ints, adding up to the dtype's width."""
    got = memory.float_format(dtype)
    assert type(got) is tuple and len(got) == 3 and all(type(b) is int for b in got), got
    assert got == bits
    assert sum(bits) == torch.finfo(dtype).bits


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("memory.float_format")
@pytest.mark.parametrize("dtype", [torch.int32, torch.float64], ids=["int32", "float64"])
def test_float_format_raises_type_error_for_other_dtypes(memory, dtype):
    """float_format raises TypeError for a dtype outside the five formats of the lecture."""
    with pytest.raises(TypeError):
        memory.float_format(dtype)


@pytest.mark.points(1)
@pytest.mark.task("memory.underflows_to_zero")
def test_1e_minus_8_underflows_in_float16_but_not_in_bfloat16(memory):
    """1e-8 rounds to 0 in float16 (5 exponent bits) but not in bfloat16 (8 exponent bits, as float32).

    Hint: convert the value into the dtype and look at what comes back.
    """
    assert memory.underflows_to_zero(1e-8, torch.float16) is True
    assert memory.underflows_to_zero(1e-8, torch.bfloat16) is False


@pytest.mark.points(3)
@pytest.mark.task("memory.underflows_to_zero")
def test_underflows_to_zero_agrees_with_a_cast(memory):
    """underflows_to_zero is True exactly when a nonzero value becomes 0 when cast to the dtype (subnormals count),
    on cases that need both answers (one test, so that a constant True or False earns nothing)."""
    for value, dtype in [(2e-8, torch.float16), (6e-8, torch.float16), (1e-3, torch.float8_e4m3fn),
                         (1e-4, torch.float8_e4m3fn), (1e-46, torch.float32), (0.0, torch.float16)]:
        expected = value != 0 and torch.tensor(value, dtype=torch.float64).to(dtype).item() == 0
        got = memory.underflows_to_zero(value, dtype)
        assert got is expected, f"underflows_to_zero({value}, {dtype}): expected {expected}, got {got!r}"


@pytest.mark.points(1)
@pytest.mark.task("memory.training_state_bytes")
def test_training_state_bytes_sums_parameter_gradient_and_optimizer_bytes(memory):
    """AdamW in fp32 keeps 4 + 4 + 8 = 16 bytes per parameter; other byte counts add up the same way."""
    got = memory.training_state_bytes(10**9)
    assert type(got) is int and got == 16 * 10**9
    assert memory.training_state_bytes(7, param_bytes=2, grad_bytes=2, optimizer_bytes=12) == 7 * 16


@pytest.mark.points(1)
@pytest.mark.task("memory.max_trainable_parameters")
def test_eight_80gb_gpus_hold_40b_parameters_with_adamw(memory):
    """8 × 80 GB (decimal) at 16 bytes per parameter holds 40·10⁹ parameters (whole parameters only)."""
    got = memory.max_trainable_parameters(8 * 80 * 10**9)
    assert type(got) is int and got == 40 * 10**9
    assert memory.max_trainable_parameters(100, bytes_per_parameter=16) == 6


def invalid(function, *args, names):
    """One invalid-argument case, tagged with the contract item it exercises."""
    return pytest.param(function, args, names, marks=pytest.mark.task(f"memory.{function}"),
                        id=f"{function}{args}")


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.parametrize("function, args, names", [
    invalid("training_state_bytes", -1, names="num_parameters"),
    invalid("training_state_bytes", 10, -4, names="param_bytes"),
    invalid("max_trainable_parameters", -1, names="memory_bytes"),
    invalid("max_trainable_parameters", 100, 0, names="bytes_per_parameter"),
])
def test_memory_functions_reject_invalid_sizes(memory, function, args, names):
    """A negative size (or zero bytes per parameter) raises ValueError with a message naming the argument.

    Hint (did not raise, raised, values): check each argument first and raise ValueError(f"num_parameters must be ..., got {value}").
    """
    with pytest.raises(ValueError, match=names):
        getattr(memory, function)(*args)
