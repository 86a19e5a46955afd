"""Compute accounting, another correct way: FLOPs from the output's shape, the roofline by comparison."""

from __future__ import annotations

import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SECONDS_PER_DAY = 86_400.0
# Overload packets by schema name; the matmuls give the argument index of their first matrix.
MATMULS = {"aten::mm": 0, "aten::bmm": 0, "aten::addmm": 1, "aten::baddbmm": 1}
ELEMENTWISE = {"aten::add", "aten::sub", "aten::mul", "aten::div"}


def _whole(name: str, value, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def _positive(name: str, value, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)


def matmul_flops(m: int, n: int, p: int) -> int:
    return 2 * _whole("m", m) * _whole("n", n) * _whole("p", p)


class FlopCounter(TorchDispatchMode):
    """Each output element of a matmul costs 2·n FLOPs (n the inner size); of an elementwise op, 1."""

    def __init__(self, count_elementwise: bool = False) -> None:
        super().__init__()
        self.count_elementwise = count_elementwise
        self.flops_by_op: dict[str, int] = {}

    @property
    def total_flops(self) -> int:
        return sum(self.flops_by_op.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func._schema.name
        if name in MATMULS:
            inner = args[MATMULS[name]].shape[-1]
            self._add(name, 2 * out.numel() * inner)
        elif self.count_elementwise and name in ELEMENTWISE:
            self._add(name, out.numel())
        return out

    def _add(self, name: str, flops: int) -> None:
        key = name.replace("::", ".")
        self.flops_by_op[key] = self.flops_by_op.get(key, 0) + flops


def arithmetic_intensity(flops, bytes_moved) -> float:
    return _positive("flops", flops, allow_zero=True) / _positive("bytes_moved", bytes_moved)


def matmul_arithmetic_intensity(m: int, n: int, p: int, bytes_per_element) -> float:
    m, n, p = _whole("m", m, 1), _whole("n", n, 1), _whole("p", p, 1)
    width = _positive("bytes_per_element", bytes_per_element)
    return 2 * m * n * p / (width * (m * n + n * p + m * p))


def ridge_point(peak_flops_per_sec, bandwidth_bytes_per_sec) -> float:
    return _positive("peak_flops_per_sec", peak_flops_per_sec) / _positive("bandwidth_bytes_per_sec",
                                                                           bandwidth_bytes_per_sec)


def is_compute_bound(intensity, peak_flops_per_sec, bandwidth_bytes_per_sec) -> bool:
    """Memory time (bytes / bandwidth) at most compute time (FLOPs / peak), per FLOP: i · bw >= peak."""
    intensity = _positive("intensity", intensity, allow_zero=True)
    peak = _positive("peak_flops_per_sec", peak_flops_per_sec)
    return intensity * _positive("bandwidth_bytes_per_sec", bandwidth_bytes_per_sec) >= peak


def attainable_flops_per_sec(intensity, peak, bandwidth) -> float:
    intensity = _positive("intensity", intensity, allow_zero=True)
    peak, bandwidth = _positive("peak", peak), _positive("bandwidth", bandwidth)
    return peak if intensity >= peak / bandwidth else intensity * bandwidth


def training_flops(num_parameters, num_tokens) -> float:
    # Parameters and tokens checked as counts (whole numbers), as the handout's conventions call them.
    return 2.0 * _whole("num_parameters", num_parameters) * 3.0 * _whole("num_tokens", num_tokens)


def training_days(num_parameters, num_tokens, num_gpus, peak_flops_per_gpu, mfu) -> float:
    gpus = _whole("num_gpus", num_gpus, 1)
    peak = _positive("peak_flops_per_gpu", peak_flops_per_gpu)
    if not (isinstance(mfu, (int, float)) and not isinstance(mfu, bool) and 0 < mfu <= 1):
        raise ValueError(f"mfu must be in (0, 1], got {mfu!r}")
    seconds = training_flops(num_parameters, num_tokens) / (gpus * peak * mfu)
    return seconds / SECONDS_PER_DAY


def mfu(flops, seconds, peak_flops_per_sec) -> float:
    return _positive("flops", flops, True) / (_positive("seconds", seconds) * _positive("peak_flops_per_sec",
                                                                                        peak_flops_per_sec))


def _weight_intensity(rows: int, d_model: int, bytes_per_element) -> float:
    """One (d, d) weight read, (rows, d) read and written: 2·rows·d² FLOPs."""
    width = _positive("bytes_per_element", bytes_per_element)
    return 2 * rows * d_model * d_model / (width * (d_model * d_model + 2 * rows * d_model))


def decode_arithmetic_intensity(batch_size: int, d_model: int, bytes_per_element) -> float:
    return _weight_intensity(_whole("batch_size", batch_size, 1), _whole("d_model", d_model, 1), bytes_per_element)


def prefill_arithmetic_intensity(num_tokens: int, d_model: int, bytes_per_element) -> float:
    return _weight_intensity(_whole("num_tokens", num_tokens, 1), _whole("d_model", d_model, 1), bytes_per_element)
