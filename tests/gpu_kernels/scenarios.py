"""Scenarios: the parts of the gpu_kernels tests that hand student code a function to run.

Each scenario takes keyword arguments of plain data, builds its inputs, calls the student's code and
returns plain data only; the tests decide what the answer should be. When grading, this module runs in
the sandboxed worker beside the submission: only the standard library, torch, kernels and the
student's package are imported here.
"""

import kernels  # noqa: F401  (selects Triton's mode before anything imports Triton)
import time

import torch

# --- counting and measurement ------------------------------------------------------------------------

ELEMENTWISE = {
    "add": lambda s: s + s, "sub": lambda s: s - s, "mul": lambda s: s * s, "div": lambda s: s / s,
    "exp": torch.exp, "neg": torch.neg, "tanh": torch.tanh, "sin": torch.sin, "sigmoid": torch.sigmoid,
}


def _start_cuda() -> None:
    """Initialise CUDA where there is a GPU, so that its one-off start-up (a fraction of a second, at the
    first synchronisation) does not land in a timed call of a function that never touches the GPU."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def benchmark_calls(warmup: int, rep: int, args: list) -> dict:
    """benchmark(fn, *args, warmup=, rep=) with an fn that logs its arguments: the result and the log."""
    from gpu_kernels.measure import benchmark

    _start_cuda()
    log = []
    result = benchmark(lambda *given: log.append(list(given)), *args, warmup=warmup, rep=rep)
    return {"result": result, "calls": len(log), "args": log}


def benchmark_durations(durations: list[float], warmup: int, rep: int) -> float:
    """benchmark of an fn whose i-th call sleeps durations[i] seconds (and does nothing after the list ends)."""
    from gpu_kernels.measure import benchmark

    _start_cuda()
    calls = iter(durations)

    def fn() -> None:
        pause = next(calls, 0.0)
        if pause:
            time.sleep(pause)

    return benchmark(fn, warmup=warmup, rep=rep)


def benchmark_cuda_sleep(cycles: int, warmup: int, rep: int) -> dict:
    """benchmark of an fn that queues one CUDA kernel spinning `cycles` clock cycles and returns at once;
    beside it, that kernel's own duration in seconds, measured with CUDA events."""
    from gpu_kernels.measure import benchmark

    torch.cuda.synchronize()
    result = benchmark(torch.cuda._sleep, cycles, warmup=warmup, rep=rep)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return {"benchmark": result, "kernel": start.elapsed_time(end) / 1000}


def measure_error(function: str, kwargs: dict) -> str:
    """What benchmark or profile_top_ops (`function`) of a do-nothing fn raises with `kwargs`: "ValueError:
    message", or "no error"; other exceptions propagate."""
    from gpu_kernels import measure

    try:
        getattr(measure, function)(lambda: None, **kwargs)
    except ValueError as exc:
        return f"ValueError: {exc}"
    return "no error"


def profile_program(matmuls: int, size: int, ops: dict, k: int) -> list:
    """profile_top_ops of a program: `matmuls` (size, size) matmuls, then each small elementwise op of
    `ops` (a name of ELEMENTWISE -> how many calls) on a 4-element tensor."""
    from gpu_kernels.measure import profile_top_ops

    generator = torch.Generator().manual_seed(0)
    big, small = torch.randn(size, size, generator=generator), torch.randn(4, generator=generator)

    def program(x: torch.Tensor, s: torch.Tensor) -> None:
        for _ in range(matmuls):
            torch.mm(x, x)
        for name, calls in ops.items():
            for _ in range(calls):
                ELEMENTWISE[name](s)

    return profile_top_ops(program, big, small, k=k)
