"""Scenarios of the gpu_kernels public tests: each drives the student's code and returns plain data.

They run where the student's code runs (in the grader's sandboxed worker when grading), import the
student's modules inside their bodies, and return only wire types. Tensors come and go on the CPU: a
scenario moves its inputs to `device` ("cpu" for the Triton interpreter, "cuda" on a GPU), applies the
strided view the test names (conftest.apply_view, the same code), and moves results back.

The kernels' scenarios (`stores = True`) also say, under the interpreter, which elements of each result
the student's kernels stored (kernels.stores): the tests' `student` checks that all of them were.
"""

import kernels  # noqa: F401  (selects Triton's mode before anything imports Triton)
import time

import torch

# ---- The kernels (§2 to §4) --------------------------------------------------------------------------


def _view(x: torch.Tensor, view: str | None) -> torch.Tensor:
    """conftest.apply_view, repeated here: the worker cannot import the tests' conftest."""
    if view is None:
        return x
    return {"t": lambda: x.transpose(-1, -2), "step": lambda: x[..., ::2], "offset": lambda: x[1:]}[view]()


def _launched(call, key: str) -> dict:
    """{key: call()'s result on the CPU, "launches": the Triton kernels it launched, "kernel_stores": which of
    its elements the package's kernels stored (under the interpreter)}."""
    from kernels.launches import record_launches
    from kernels.stores import accounts, package_dir, record_stores

    with record_launches() as launches, record_stores(package_dir("gpu_kernels")) as stores:
        result = call()
    return {key: result.detach().to("cpu"), "launches": list(launches.names),
            "kernel_stores": accounts(stores, **{key: result})}


def gelu(x: torch.Tensor, view, device: str) -> dict:
    """gelu_triton of `view` of x on `device`: {"y": tensor, "launches": [kernel names], "kernel_stores"}."""
    from gpu_kernels.elementwise import gelu_triton

    x = _view(x.to(device), view)
    return _launched(lambda: gelu_triton(x), "y")


def softmax(x: torch.Tensor, view, block_size, device: str) -> dict:
    """softmax_triton of `view` of x on `device` (block_size None: the implementation's default)."""
    from gpu_kernels.softmax import softmax_triton

    x = _view(x.to(device), view)
    return _launched(lambda: softmax_triton(x) if block_size is None else softmax_triton(x, block_size), "y")


def matmul(a: torch.Tensor, b: torch.Tensor, bias, activation, a_view, b_view, device: str) -> dict:
    """matmul_triton(view of a, view of b, bias, activation) on `device`."""
    from gpu_kernels.matmul import matmul_triton

    a, b = _view(a.to(device), a_view), _view(b.to(device), b_view)
    bias = None if bias is None else bias.to(device)
    return _launched(lambda: matmul_triton(a, b, bias, activation), "c")


gelu.stores = softmax.stores = matmul.stores = True


def tile_of(M: int, N: int, block_m: int, block_n: int, group_m: int) -> list | None:
    """The (tile_m, tile_n) the student's `_tile_of` gives each pid of the grid, read by a probe kernel under the
    interpreter (kernels.design.tile_of); None where kernels are compiled (a GPU)."""
    from kernels import design

    return design.tile_of(M, N, block_m, block_n, group_m)


# ---- On a GPU: milliseconds, by do_bench, in the same process as the baseline ------------------------


def _randn(shape, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", dtype=dtype, generator=gen)


def gelu_ms(numel: int, dtype: torch.dtype) -> dict:
    """Milliseconds of gelu_triton and of torch's F.gelu(approximate="tanh") on one bf16 vector."""
    from kernels.bench import benchmark

    from gpu_kernels.elementwise import gelu_triton

    x = _randn((numel,), dtype)
    ours = benchmark(lambda: gelu_triton(x), warmup=100, rep=500)
    torch_ms = benchmark(lambda: torch.nn.functional.gelu(x, approximate="tanh"), warmup=100, rep=500)
    return {"triton": ours, "torch": torch_ms}


def matmul_ms(m: int, n: int, k: int, dtype: torch.dtype) -> dict:
    """Milliseconds of matmul_triton(a, b) and of torch.matmul (cuBLAS) at (m, k) x (k, n)."""
    from kernels.bench import benchmark

    from gpu_kernels.matmul import matmul_triton

    a, b = _randn((m, k), dtype, 1), _randn((k, n), dtype, 2)
    ours = benchmark(lambda: matmul_triton(a, b), warmup=100, rep=500)
    cublas = benchmark(lambda: torch.matmul(a, b), warmup=100, rep=500)
    return {"triton": ours, "cublas": cublas}


def epilogue_ms(m: int, n: int, k: int, dtype: torch.dtype) -> dict:
    """Milliseconds of matmul_triton(a, b, bias, "gelu") and of the unfused sequence: matmul_triton(a, b),
    then + bias, then GeLU (torch ops, each a pass over C through HBM)."""
    from kernels.bench import benchmark

    from gpu_kernels.matmul import matmul_triton

    a, b, bias = _randn((m, k), dtype, 1), _randn((k, n), dtype, 2), _randn((n,), dtype, 3)
    fused = benchmark(lambda: matmul_triton(a, b, bias, "gelu"), warmup=100, rep=500)
    unfused = benchmark(lambda: torch.nn.functional.gelu(matmul_triton(a, b) + bias, approximate="tanh"),
                        warmup=100, rep=500)
    return {"fused": fused, "unfused": unfused}


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
