"""Scenarios of the hidden gpu_kernels suite: each drives the student's code and returns plain data.

They run where the student's code runs (the grader's sandboxed worker), import the student's modules
inside their bodies and return only wire types. Inputs arrive as CPU tensors (or as a seed, for the
large ones) and results go back on the CPU. Each one reports what it observed, never a verdict.

Besides the results: the Triton kernels launched (`kernels.launches`) and the torch ops that compute
(`_ComputeOps`, a dispatch mode). Both are what the student's code let the worker see: the grader may
take points away for what they show, never give points for it alone (that a Triton kernel computed a
result rests on the static rules, autograder/static/triton_rules.py).
"""

import kernels  # noqa: F401  (entering a dispatch mode imports Triton: select its mode first)
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

# ---- The kernels (§2 to §4) --------------------------------------------------------------------------

# aten ops that compute what the kernels must: a Triton task's host code runs none of them.
_COMPUTE = {"aten.gelu", "aten.tanh", "aten.erf", "aten.exp", "aten.exp2", "aten._softmax", "aten._log_softmax",
            "aten.logsumexp", "aten.mm", "aten.bmm", "aten.addmm", "aten.baddbmm", "aten.matmul", "aten.linear",
            "aten.einsum", "aten.add", "aten.sub", "aten.mul", "aten.div", "aten.relu", "aten.clamp",
            "aten.clamp_min", "aten.maximum", "aten.amax", "aten.max", "aten.sum", "aten.sigmoid", "aten.where"}


class _ComputeOps(TorchDispatchMode):
    """Records the computing aten ops (_COMPUTE) run inside the block, once each, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if name in _COMPUTE:
            self.names.add(name)
        return func(*args, **(kwargs or {}))


def _view(x: torch.Tensor, view) -> torch.Tensor:
    """tests/gpu_kernels/conftest.apply_view, repeated: the worker cannot import the grader's code."""
    if view is None:
        return x
    return {"t": lambda: x.transpose(-1, -2), "step": lambda: x[..., ::2], "offset": lambda: x[1:]}[view]()


def _observed(call) -> dict:
    """call()'s result on the CPU, the Triton kernels it launched and the computing torch ops it ran."""
    from kernels.launches import record_launches

    with record_launches() as launches, _ComputeOps() as ops:
        result = call()
    out = result.detach().to("cpu") if isinstance(result, torch.Tensor) else result
    return {"out": out, "launches": list(launches.names), "torch_ops": sorted(ops.names)}


def gelu(x: torch.Tensor, view, device: str) -> dict:
    """gelu_triton of `view` of x on `device`."""
    from gpu_kernels.elementwise import gelu_triton

    x = _view(x.to(device), view)
    return _observed(lambda: gelu_triton(x))


def softmax(x: torch.Tensor, view, block_size, device: str) -> dict:
    """softmax_triton of `view` of x on `device` (block_size None: the implementation's default)."""
    from gpu_kernels.softmax import softmax_triton

    x = _view(x.to(device), view)
    return _observed(lambda: softmax_triton(x) if block_size is None else softmax_triton(x, block_size))


def matmul(a: torch.Tensor, b: torch.Tensor, bias, activation, a_view, b_view, device: str) -> dict:
    """matmul_triton(view of a, view of b, bias, activation) on `device`."""
    from gpu_kernels.matmul import matmul_triton

    a, b = _view(a.to(device), a_view), _view(b.to(device), b_view)
    bias = None if bias is None else bias.to(device)
    return _observed(lambda: matmul_triton(a, b, bias, activation))


# ---- Timed on the trusted side (GPU) ------------------------------------------------------------------


def seeded_randn(seed: int, shapes: list, device: str, dtype: torch.dtype) -> list[torch.Tensor]:
    """Standard normal tensors of `shapes` from one seeded generator on `device` (reproducible there)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn(*shape, generator=gen, device=device, dtype=dtype) for shape in shapes]


def timed(kernel: str, seed: int, shapes: list, dtype: torch.dtype, iterations: int, check: int, rows: list,
          device: str, activation=None) -> torch.Tensor:
    """Run the student's `kernel` `iterations` times on fresh inputs; return rows of one iteration's output.

    Iteration i draws its inputs of `shapes` from seed + i with `seeded_randn` on `device` (so the grader
    can draw the same ones). kernel "gelu": gelu_triton(x); "matmul": matmul_triton(a, b); "epilogue":
    matmul_triton(a, b, bias, activation); "unfused": matmul_triton(a, b), then + bias and the
    activation as torch ops. The grader times this whole call with its own clock; the device is
    synchronised before returning. For iteration `check` it returns the given `rows` of the output
    (of its first dim).
    """
    from gpu_kernels.elementwise import gelu_triton
    from gpu_kernels.matmul import matmul_triton

    def unfused(a, b, bias):
        c = matmul_triton(a, b) + bias
        return torch.nn.functional.gelu(c, approximate="tanh") if activation == "gelu" else c.relu()

    run = {"gelu": gelu_triton, "matmul": matmul_triton,
           "epilogue": lambda a, b, bias: matmul_triton(a, b, bias, activation), "unfused": unfused}[kernel]
    kept = None
    for i in range(iterations):
        out = run(*seeded_randn(seed + i, shapes, device, dtype))
        if i == check:
            kept = out
    if device == "cuda":
        torch.cuda.synchronize()
    return kept[rows].detach().to("cpu")


# ---- Built for a GPU, on any machine ------------------------------------------------------------------


def gpu_builds(kernel: str, dtype: str, target: str) -> dict:
    """The Triton kernels the student's `kernel` ("gelu", "softmax", "matmul" with a bias and GeLU) launches
    on a GPU at the handout's build shapes, built for `target` in `dtype` ("bf16", "fp16"):
    {"launches": [...], "builds": [...]} or {"error": ...}.

    The student's function runs as on a GPU (fake CUDA tensors; each launch recorded, not run) and each
    kernel is compiled at the first of its autotune configs (kernels.crosscompile), in a subprocess: this
    worker interprets Triton, the compiler needs TRITON_INTERPRET=0.
    """
    from kernels.crosscompile import GPU_KERNELS_CALLS, run_request

    calls = [dict(module=module, function=function, args=args, kwargs=kwargs)
             for module, function, args, kwargs in GPU_KERNELS_CALLS[kernel]]
    return run_request(dict(calls=calls, dtype=dtype, target=target))


# --- counting and measurement ------------------------------------------------------------------------


def profile_linear(size: int, k: int) -> list:
    """profile_top_ops of F.linear(x, w) without a bias, on (size, size) matrices: aten::linear wraps aten::mm."""
    from gpu_kernels.measure import profile_top_ops

    generator = torch.Generator().manual_seed(0)
    x, w = torch.randn(size, size, generator=generator), torch.randn(size, size, generator=generator)
    return profile_top_ops(F.linear, x, w, k=k)
