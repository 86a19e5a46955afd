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
    ### BEGIN SOLUTION
    return 2 * _count("m", m) * _count("n", n) * _count("p", p)
    ### END SOLUTION


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
        ### BEGIN SOLUTION
        packet = func.overloadpacket
        # Where the two matrices sit among each op's arguments (addmm and baddbmm take the bias first).
        matrices = {aten.mm: (0, 1), aten.addmm: (1, 2), aten.bmm: (0, 1), aten.baddbmm: (1, 2)}
        if packet in matrices:
            a, b = (args[i].shape for i in matrices[packet])
            batch = a[0] if len(a) == 3 else 1
            flops = batch * matmul_flops(a[-2], a[-1], b[-1])
        elif self.count_elementwise and packet in (aten.add, aten.sub, aten.mul, aten.div):
            flops = out.numel()
        else:
            return out
        name = str(packet)  # "aten.mm"
        self.flops_by_op[name] = self.flops_by_op.get(name, 0) + flops
        ### END SOLUTION
        return out


def arithmetic_intensity(flops, bytes_moved) -> float:
    """FLOPs per byte moved.

    Handout: §4 Arithmetic intensity and the roofline
    """
    ### BEGIN SOLUTION
    return _number("flops", flops, positive=False) / _number("bytes_moved", bytes_moved)
    ### END SOLUTION


def matmul_arithmetic_intensity(m: int, n: int, p: int, bytes_per_element) -> float:
    """2mnp / ((mn + np + mp) · bytes_per_element): read both inputs once, write the output once.

    Handout: §4 Arithmetic intensity and the roofline
    """
    ### BEGIN SOLUTION
    m, n, p = _count("m", m, 1), _count("n", n, 1), _count("p", p, 1)
    bytes_moved = (m * n + n * p + m * p) * _number("bytes_per_element", bytes_per_element)
    return arithmetic_intensity(matmul_flops(m, n, p), bytes_moved)
    ### END SOLUTION


def ridge_point(peak_flops_per_sec, bandwidth_bytes_per_sec) -> float:
    """The intensity (FLOP/byte) at which memory time equals compute time: peak / bandwidth.

    Handout: §4 Arithmetic intensity and the roofline
    """
    ### BEGIN SOLUTION
    return _number("peak_flops_per_sec", peak_flops_per_sec) / _number("bandwidth_bytes_per_sec",
                                                                        bandwidth_bytes_per_sec)
    ### END SOLUTION


def is_compute_bound(intensity, peak_flops_per_sec, bandwidth_bytes_per_sec) -> bool:
    """True when `intensity` is at or above the ridge point (at the ridge both limits are equal).

    Handout: §4 Arithmetic intensity and the roofline
    """
    ### BEGIN SOLUTION
    return _number("intensity", intensity, positive=False) >= ridge_point(peak_flops_per_sec,
                                                                           bandwidth_bytes_per_sec)
    ### END SOLUTION


def attainable_flops_per_sec(intensity, peak, bandwidth) -> float:
    """The roofline: min(peak, intensity × bandwidth).

    Handout: §4 Arithmetic intensity and the roofline
    """
    ### BEGIN SOLUTION
    intensity = _number("intensity", intensity, positive=False)
    return min(_number("peak", peak), intensity * _number("bandwidth", bandwidth))
    ### END SOLUTION


def training_flops(num_parameters, num_tokens) -> float:
    """6·N·T: 2 FLOPs per parameter per token forward, 4 backward.

    Handout: §5 Training compute
    """
    ### BEGIN SOLUTION
    return 6.0 * _number("num_parameters", num_parameters, positive=False) * _number("num_tokens", num_tokens,
                                                                                      positive=False)
    ### END SOLUTION


def training_days(num_parameters, num_tokens, num_gpus, peak_flops_per_gpu, mfu) -> float:
    """Days to train on `num_gpus` GPUs running at `mfu` × `peak_flops_per_gpu` each; mfu in (0, 1].

    Handout: §5 Training compute
    """
    ### BEGIN SOLUTION
    if _number("mfu", mfu) > 1:
        raise ValueError(f"mfu is a fraction of peak in (0, 1], got {mfu!r}")
    rate = _count("num_gpus", num_gpus, 1) * _number("peak_flops_per_gpu", peak_flops_per_gpu) * mfu
    return training_flops(num_parameters, num_tokens) / rate / SECONDS_PER_DAY
    ### END SOLUTION


def mfu(flops, seconds, peak_flops_per_sec) -> float:
    """Model FLOPs utilisation: achieved FLOP/s (flops / seconds) over the peak.

    Handout: §5 Training compute
    """
    ### BEGIN SOLUTION
    achieved = _number("flops", flops, positive=False) / _number("seconds", seconds)
    return achieved / _number("peak_flops_per_sec", peak_flops_per_sec)
    ### END SOLUTION


def decode_arithmetic_intensity(batch_size: int, d_model: int, bytes_per_element) -> float:
    """Intensity of one (d_model, d_model) weight applied to the (batch_size, d_model) decode step.

    Handout: §6 Decoding and prefill
    """
    ### BEGIN SOLUTION
    # One new token per sequence: the whole weight is read to do 2·d_model² FLOPs per sequence.
    return matmul_arithmetic_intensity(_count("batch_size", batch_size, 1), _count("d_model", d_model, 1),
                                       d_model, bytes_per_element)
    ### END SOLUTION


def prefill_arithmetic_intensity(num_tokens: int, d_model: int, bytes_per_element) -> float:
    """Intensity of one (d_model, d_model) weight applied to the (num_tokens, d_model) prompt.

    Handout: §6 Decoding and prefill
    """
    ### BEGIN SOLUTION
    # Every prompt token at once: the weight read is shared by num_tokens rows of work.
    return matmul_arithmetic_intensity(_count("num_tokens", num_tokens, 1), _count("d_model", d_model, 1),
                                       d_model, bytes_per_element)
    ### END SOLUTION
