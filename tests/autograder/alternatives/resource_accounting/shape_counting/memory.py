"""Memory accounting, another correct way: a typed-in format table and underflow by the rounding threshold."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch


class FloatFormat(NamedTuple):
    sign_bits: int
    exponent_bits: int
    mantissa_bits: int


# The lecture's table, typed in rather than derived from torch.finfo.
TABLE = {
    torch.float32: FloatFormat(1, 8, 23),
    torch.float16: FloatFormat(1, 5, 10),
    torch.bfloat16: FloatFormat(1, 8, 7),
    torch.float8_e4m3fn: FloatFormat(1, 4, 3),
    torch.float8_e5m2: FloatFormat(1, 5, 2),
}


def _whole(name: str, value, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def get_memory_usage(x: torch.Tensor) -> int:
    """nelement × the dtype's item size: shape and dtype only, so meta tensors work."""
    return x.nelement() * x.dtype.itemsize


def float_format(dtype: torch.dtype) -> FloatFormat:
    try:
        return TABLE[dtype]
    except (KeyError, TypeError):
        raise TypeError(f"float_format knows only {list(TABLE)}, not {dtype!r}") from None


def underflows_to_zero(value: float, dtype: torch.dtype) -> bool:
    """Round to nearest even: a value rounds to 0 when it is at most half the smallest subnormal.

    The smallest subnormal is smallest_normal · eps; exactly half of it is a tie, and the tie goes to
    the even neighbour, 0 (the subnormal's last mantissa bit is 1).
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"value must be a finite number, got {value!r}")
    info = torch.finfo(dtype)
    return value != 0 and abs(value) <= info.smallest_normal * info.eps / 2


def training_state_bytes(num_parameters, param_bytes=4, grad_bytes=4, optimizer_bytes=8) -> int:
    total = 0
    for name, per in (("param_bytes", param_bytes), ("grad_bytes", grad_bytes), ("optimizer_bytes", optimizer_bytes)):
        total += _whole(name, per)
    return total * _whole("num_parameters", num_parameters)


def max_trainable_parameters(memory_bytes, bytes_per_parameter=16) -> int:
    memory_bytes = _whole("memory_bytes", memory_bytes)
    per = _whole("bytes_per_parameter", bytes_per_parameter, 1)
    return memory_bytes // per
