"""Time a function in milliseconds: `triton.testing.do_bench` on a GPU, a wall-clock timer on a CPU.

    ms = benchmark(lambda: flash_forward_triton(q, k, v), warmup=25, rep=100)

`warmup` and `rep` are budgets in milliseconds, as in do_bench: run for about `warmup` ms first
(caches, compilation, autotuning), then time repeated runs for about `rep` ms. The result is the
median run time. do_bench needs a GPU driver ("0 active drivers" otherwise), so without one the
helper times with time.perf_counter instead; it always runs the function at least MIN_RUNS times.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import kernels  # noqa: F401  (select the interpreter before Triton is imported)
import torch

MIN_RUNS = 3


def benchmark(fn: Callable[[], object], warmup: float = 25, rep: float = 100, device: str | None = None) -> float:
    """Median milliseconds per call of `fn()`; on "cuda" (the default where there is a GPU) by do_bench."""
    if warmup < 0 or rep <= 0:
        raise ValueError(f"warmup must be >= 0 and rep > 0 milliseconds, got warmup={warmup!r}, rep={rep!r}")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
    if device != "cpu":
        raise ValueError(f"benchmark times on 'cuda' or 'cpu', got device {device!r}")
    return _cpu_benchmark(fn, warmup, rep)


def _cpu_benchmark(fn: Callable[[], object], warmup: float, rep: float) -> float:
    deadline = time.perf_counter() + warmup / 1000
    fn()  # at least once: the first call pays for imports and caches
    while time.perf_counter() < deadline:
        fn()
    times: list[float] = []
    deadline = time.perf_counter() + rep / 1000
    while len(times) < MIN_RUNS or time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)
