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
    raise NotImplementedError('get_memory_usage in resource_accounting/memory.py is not implemented yet: write it (handout §1 Memory accounting)')


def float_format(dtype: torch.dtype) -> FloatFormat:
    """(sign, exponent, mantissa) bits of float32, float16, bfloat16, float8_e4m3fn or float8_e5m2.

    TypeError for any other dtype.

    Handout: §1 Memory accounting
    """
    raise NotImplementedError('float_format in resource_accounting/memory.py is not implemented yet: write it (handout §1 Memory accounting)')


def underflows_to_zero(value: float, dtype: torch.dtype) -> bool:
    """True when the nonzero `value` rounds to 0 in `dtype` (1e-8: True in float16, False in bfloat16).

    Handout: §1 Memory accounting
    """
    raise NotImplementedError('underflows_to_zero in resource_accounting/memory.py is not implemented yet: write it (handout §1 Memory accounting)')


def training_state_bytes(num_parameters, param_bytes=4, grad_bytes=4, optimizer_bytes=8) -> int:
    """Bytes for parameters, gradients and optimizer state (AdamW in fp32: 4 + 4 + 8 = 16 per parameter).

    Handout: §1 Memory accounting
    """
    raise NotImplementedError('training_state_bytes in resource_accounting/memory.py is not implemented yet: write it (handout §1 Memory accounting)')


def max_trainable_parameters(memory_bytes, bytes_per_parameter=16) -> int:
    """The most parameters whose training state fits in `memory_bytes` (8 × 80 GB at 16 B each: 40B).

    Handout: §1 Memory accounting
    """
    raise NotImplementedError('max_trainable_parameters in resource_accounting/memory.py is not implemented yet: write it (handout §1 Memory accounting)')
