"""Measuring a kernel: a benchmark done the way the lecture teaches, and the profiler's top ops.

Handout §7 Measuring a kernel: warm up first (compilation, caches, the allocator), synchronise the
device before each reading of the clock (CUDA kernels run asynchronously: a call returns as soon as
its kernels are queued), take the median of many timed runs (robust to the odd slow run).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile


def _count(name: str, value, minimum: int) -> int:
    """A whole-number argument (an int, not a bool) of at least `minimum`, else ValueError naming it."""
    if type(value) is not int or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _synchronize() -> None:
    """Wait for every queued CUDA kernel to finish (nothing to wait for on a machine without CUDA)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def benchmark(fn: Callable[..., Any], *args: Any, warmup: int = 10, rep: int = 50) -> float:
    """Median seconds per call of fn(*args): `warmup` untimed calls, then `rep` calls timed one by one,
    the device synchronised before each reading of the clock. fn runs exactly warmup + rep times.

    Handout: §7 Measuring a kernel
    """
    raise NotImplementedError('benchmark in gpu_kernels/measure.py is not implemented yet: write it (handout §7 Measuring a kernel)')


def profile_top_ops(fn: Callable[..., Any], *args: Any, k: int = 5) -> list[tuple[str, float, int]]:
    """The k ops with the most self CPU time in one profiled call of fn(*args), most first:
    [(name, self_time_us, calls), ...], e.g. ("aten::mm", 812.3, 3); fewer than k when fewer ops ran.

    Handout: §7 Measuring a kernel
    """
    raise NotImplementedError('profile_top_ops in gpu_kernels/measure.py is not implemented yet: write it (handout §7 Measuring a kernel)')
