"""Memory accounting: how many bytes tensors, number formats and training state take.

Bytes are exact Python ints. A float of a whole number (70e9) is accepted wherever a count is expected.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

# The five formats of the lecture; float_format raises TypeError for any other dtype.
FORMATS = (torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2)


class FloatFormat(NamedTuple):
    sign_bits: int
    exponent_bits: int
    mantissa_bits: int


def _count(name: str, value, minimum: int = 0) -> int:
    """`value` as an int when it is a whole number >= minimum, else a ValueError that says so."""
    whole = type(value) is int or (type(value) is float and math.isfinite(value) and value.is_integer())
    if not whole or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def get_memory_usage(x: torch.Tensor) -> int:
    """Bytes taken by the elements of `x`: numel × element_size. Works on meta tensors too.

    Handout: §1 Memory accounting
    """
    ### BEGIN SOLUTION
    # A meta tensor has a shape and a dtype but no data: the product is all we need, so the
    # lecture's 2.3 GB matrix can be measured without allocating it.
    return x.numel() * x.element_size()
    ### END SOLUTION


def float_format(dtype: torch.dtype) -> FloatFormat:
    """(sign, exponent, mantissa) bits of float32, float16, bfloat16, float8_e4m3fn or float8_e5m2.

    TypeError for any other dtype.

    Handout: §1 Memory accounting
    """
    ### BEGIN SOLUTION
    if dtype not in FORMATS:
        raise TypeError(f"float_format knows {', '.join(map(str, FORMATS))}; got {dtype!r}")
    info = torch.finfo(dtype)
    # eps, the gap between 1 and the next number, is 2^-mantissa_bits; one bit is the sign and the
    # rest of the word is the exponent.
    mantissa = round(-math.log2(info.eps))
    return FloatFormat(1, info.bits - 1 - mantissa, mantissa)
    ### END SOLUTION


def underflows_to_zero(value: float, dtype: torch.dtype) -> bool:
    """True when the nonzero `value` rounds to 0 in `dtype` (1e-8: True in float16, False in bfloat16).

    Handout: §1 Memory accounting
    """
    ### BEGIN SOLUTION
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    if type(value) not in (int, float) or not math.isfinite(value):
        raise ValueError(f"value must be a finite number, got {value!r}")
    # Let the cast decide. (torch casts float64 to bfloat16, float16 and both fp8 formats through float32:
    # a value a hair above half the smallest subnormal rounds to exactly half, then to even, 0. The tests
    # accept either answer there.)
    rounded = torch.tensor(value, dtype=torch.float64).to(dtype)
    return value != 0 and rounded.item() == 0
    ### END SOLUTION


def training_state_bytes(num_parameters, param_bytes=4, grad_bytes=4, optimizer_bytes=8) -> int:
    """Bytes for parameters, gradients and optimizer state (AdamW in fp32: 4 + 4 + 8 = 16 per parameter).

    Handout: §1 Memory accounting
    """
    ### BEGIN SOLUTION
    per_parameter = (_count("param_bytes", param_bytes) + _count("grad_bytes", grad_bytes)
                     + _count("optimizer_bytes", optimizer_bytes))
    return _count("num_parameters", num_parameters) * per_parameter
    ### END SOLUTION


def max_trainable_parameters(memory_bytes, bytes_per_parameter=16) -> int:
    """The most parameters whose training state fits in `memory_bytes` (8 × 80 GB at 16 B each: 40B).

    Handout: §1 Memory accounting
    """
    ### BEGIN SOLUTION
    return _count("memory_bytes", memory_bytes) // _count("bytes_per_parameter", bytes_per_parameter, minimum=1)
    ### END SOLUTION
