"""Compute accounting: FLOPs of matmuls and of training, a FLOP counter, and the roofline model.

Conventions: a matmul of (m, n) by (n, p) is 2·m·n·p FLOPs (a multiply and an add per term), as in
torch.utils.flop_counter. Rates are per second; intensities are FLOPs per byte moved to or from HBM.
FlopCounter must count by itself: torch.utils.flop_counter is forbidden in this file.
"""

from __future__ import annotations

import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
SECONDS_PER_DAY = 24 * 60 * 60


def _count(name: str, value, minimum: int = 0) -> int:
    """`value` as an int when it is a whole number >= minimum, else a ValueError that says so."""
    whole = type(value) is int or (type(value) is float and math.isfinite(value) and value.is_integer())
    if not whole or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def _number(name: str, value, positive: bool = True) -> float:
    """`value` as a float when it is finite and > 0 (>= 0 when not `positive`), else a ValueError."""
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be a finite number {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


def matmul_flops(m: int, n: int, p: int) -> int:
    """FLOPs of an (m, n) @ (n, p) matmul: 2·m·n·p.

    Handout: §3 Counting FLOPs
    """
    raise NotImplementedError('matmul_flops in resource_accounting/flops.py is not implemented yet: write it (handout §3 Counting FLOPs)')


class FlopCounter(TorchDispatchMode):
    """Counts the FLOPs of the aten ops run inside `with FlopCounter() as fc:`, forward and backward.

    Matmuls (aten mm, addmm, bmm, baddbmm) count 2·m·n·p per matrix product, the bias of addmm and
    baddbmm is free, exactly as torch's FlopCounterMode. With count_elementwise=True, aten add, sub,
    mul and div also count one FLOP per output element. `flops_by_op` is keyed by the op's overload
    packet, e.g. "aten.mm"; ops that were never counted have no key.

    Handout: §3 Counting FLOPs
    """

    def __init__(self, count_elementwise: bool = False) -> None:
        super().__init__()
        self.count_elementwise = count_elementwise
        self.flops_by_op: dict[str, int] = {}

    @property
    def total_flops(self) -> int:
        return sum(self.flops_by_op.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        raise NotImplementedError('FlopCounter.__torch_dispatch__ in resource_accounting/flops.py is not implemented yet: write it (handout §3 Counting FLOPs)')
        return out


def arithmetic_intensity(flops, bytes_moved) -> float:
    """FLOPs per byte moved.

    Handout: §4 Arithmetic intensity and the roofline
    """
    raise NotImplementedError('arithmetic_intensity in resource_accounting/flops.py is not implemented yet: write it (handout §4 Arithmetic intensity and the roofline)')


def matmul_arithmetic_intensity(m: int, n: int, p: int, bytes_per_element) -> float:
    """2mnp / ((mn + np + mp) · bytes_per_element): read both inputs once, write the output once.

    Handout: §4 Arithmetic intensity and the roofline
    """
    raise NotImplementedError('matmul_arithmetic_intensity in resource_accounting/flops.py is not implemented yet: write it (handout §4 Arithmetic intensity and the roofline)')


def ridge_point(peak_flops_per_sec, bandwidth_bytes_per_sec) -> float:
    """The intensity (FLOP/byte) at which memory time equals compute time: peak / bandwidth.

    Handout: §4 Arithmetic intensity and the roofline
    """
    raise NotImplementedError('ridge_point in resource_accounting/flops.py is not implemented yet: write it (handout §4 Arithmetic intensity and the roofline)')


def is_compute_bound(intensity, peak_flops_per_sec, bandwidth_bytes_per_sec) -> bool:
    """True when `intensity` is at or above the ridge point (at the ridge both limits are equal).

    Handout: §4 Arithmetic intensity and the roofline
    """
    raise NotImplementedError('is_compute_bound in resource_accounting/flops.py is not implemented yet: write it (handout §4 Arithmetic intensity and the roofline)')


def attainable_flops_per_sec(intensity, peak, bandwidth) -> float:
    """The roofline: min(peak, intensity × bandwidth).

    Handout: §4 Arithmetic intensity and the roofline
    """
    raise NotImplementedError('attainable_flops_per_sec in resource_accounting/flops.py is not implemented yet: write it (handout §4 Arithmetic intensity and the roofline)')


def training_flops(num_parameters, num_tokens) -> float:
    """6·N·T: 2 FLOPs per parameter per token forward, 4 backward.

    Handout: §5 Training compute
    """
    raise NotImplementedError('training_flops in resource_accounting/flops.py is not implemented yet: write it (handout §5 Training compute)')


def training_days(num_parameters, num_tokens, num_gpus, peak_flops_per_gpu, mfu) -> float:
    """Days to train on `num_gpus` GPUs running at `mfu` × `peak_flops_per_gpu` each; mfu in (0, 1].

    Handout: §5 Training compute
    """
    raise NotImplementedError('training_days in resource_accounting/flops.py is not implemented yet: write it (handout §5 Training compute)')


def mfu(flops, seconds, peak_flops_per_sec) -> float:
    """Model FLOPs utilisation: achieved FLOP/s (flops / seconds) over the peak.

    Handout: §5 Training compute
    """
    raise NotImplementedError('mfu in resource_accounting/flops.py is not implemented yet: write it (handout §5 Training compute)')


def decode_arithmetic_intensity(batch_size: int, d_model: int, bytes_per_element) -> float:
    """Intensity of one (d_model, d_model) weight applied to the (batch_size, d_model) decode step.

    Handout: §6 Decoding and prefill
    """
    raise NotImplementedError('decode_arithmetic_intensity in resource_accounting/flops.py is not implemented yet: write it (handout §6 Decoding and prefill)')


def prefill_arithmetic_intensity(num_tokens: int, d_model: int, bytes_per_element) -> float:
    """Intensity of one (d_model, d_model) weight applied to the (num_tokens, d_model) prompt.

    Handout: §6 Decoding and prefill
    """
    raise NotImplementedError('prefill_arithmetic_intensity in resource_accounting/flops.py is not implemented yet: write it (handout §6 Decoding and prefill)')
