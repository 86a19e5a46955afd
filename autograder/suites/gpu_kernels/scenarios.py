"""Scenarios of the hidden gpu_kernels suite: each drives the student's code and returns plain data.

They run where the student's code runs (the grader's sandboxed worker), import the student's modules
inside their bodies and return only wire types. Inputs arrive as CPU tensors (or as a seed, for the
large ones) and results go back on the CPU. Each one reports what it observed, never a verdict.

Besides the results: the Triton kernels launched (`kernels.launches`) and the torch ops that compute
(`kernels.host_ops`: any aten op but allocations, views, copies and metadata). Both are what the
student's code let the worker see: the grader may take points away for what they show, never give
points for it alone (that a Triton kernel computed a result rests on the static rules,
autograder/static/triton_rules.py).
"""

import kernels  # noqa: F401  (entering a dispatch mode imports Triton: select its mode first)
import torch
import torch.nn.functional as F

from kernels.device import interpreter_device

# ---- The kernels (§2 to §4) --------------------------------------------------------------------------

def _view(x: torch.Tensor, view) -> torch.Tensor:
    """tests/gpu_kernels/conftest.apply_view, repeated: the worker cannot import the grader's code."""
    if view is None:
        return x
    return {"t": lambda: x.transpose(-1, -2), "step": lambda: x[..., ::2], "offset": lambda: x[1:]}[view]()


def _observed(call) -> dict:
    """call()'s result on the CPU, the Triton kernels it launched, the computing torch ops it ran, and (under the
    interpreter) which elements of the result the package's kernels stored (kernels.stores)."""
    from kernels.host_ops import computing_ops
    from kernels.launches import record_launches
    from kernels.stores import accounts, package_dir, record_stores

    with record_launches() as launches, computing_ops() as ops, record_stores(package_dir("gpu_kernels")) as stores:
        result = call()
    out = result.detach().to("cpu") if isinstance(result, torch.Tensor) else result
    return {"out": out, "launches": list(launches.names), "torch_ops": ops.names,
            "kernel_stores": accounts(stores, out=result)}


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


gelu.stores = softmax.stores = matmul.stores = True


def program_order(kernel: str, inputs: dict, device: str):
    """What changes when the student's `kernel` runs its programs in reversed and in shuffled order instead
    of the interpreter's increasing one (kernels.program_order.program_order_problems), on `inputs` (tiny
    float32 tensors): "gelu" gelu_triton(x); "softmax" softmax_triton(x) at its default block and at
    blocks of 16; "matmul" matmul_triton(a, b, bias, "gelu"). A list of problems, [] when nothing
    changes; None when compiled (on a GPU the hardware chooses the order)."""
    device = interpreter_device(device)
    from kernels.device import interpreted

    if not interpreted():
        return None
    from kernels.program_order import program_order_problems

    x = {name: t.to(device) for name, t in inputs.items()}
    if kernel == "gelu":
        from gpu_kernels.elementwise import gelu_triton

        runs = {"gelu_triton": lambda: gelu_triton(x["x"])}
    elif kernel == "softmax":
        from gpu_kernels.softmax import softmax_triton

        runs = {"softmax_triton": lambda: softmax_triton(x["x"]),
                "softmax_triton (block_size 16)": lambda: softmax_triton(x["x"], 16)}
    else:
        from gpu_kernels.matmul import matmul_triton

        runs = {'matmul_triton (bias, "gelu")': lambda: matmul_triton(x["a"], x["b"], x["bias"], "gelu")}
    return [problem for what, run in runs.items() for problem in program_order_problems(run, what)]


program_order.interpreted = True  # counts under the interpreter: the grader runs it there on any machine


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
    activation as torch ops; "none": nothing (the same call and draws without a kernel: the grader
    subtracts its time, the round trip into the worker and the drawing, as it subtracts the drawing
    from its own baseline loop). The grader times this whole call with its own clock; the device is
    synchronised before returning. For iteration `check` it returns the given `rows` of the output
    (of its first dim); "none" returns an empty tensor.
    """
    from gpu_kernels.elementwise import gelu_triton
    from gpu_kernels.matmul import matmul_triton

    def unfused(a, b, bias):
        c = matmul_triton(a, b) + bias
        return torch.nn.functional.gelu(c, approximate="tanh") if activation == "gelu" else c.relu()

    run = {"gelu": gelu_triton, "matmul": matmul_triton,
           "epilogue": lambda a, b, bias: matmul_triton(a, b, bias, activation), "unfused": unfused,
           "none": lambda *inputs: None}[kernel]
    kept = None
    for i in range(iterations):
        out = run(*seeded_randn(seed + i, shapes, device, dtype))
        if i == check:
            kept = out
    if device == "cuda":
        torch.cuda.synchronize()
    return torch.empty(0) if kept is None else kept[rows].detach().to("cpu")


# ---- Built for a GPU, on any machine ------------------------------------------------------------------


def gpu_builds(kernel: str, dtype: str, target: str) -> dict:
    """The Triton kernels the student's `kernel` ("gelu", "softmax", "matmul" with a bias and GeLU) launches
    on a GPU at the handout's build shapes, built for `target` in `dtype` ("bf16", "fp16"):
    {"launches": [...], "builds": [...]} or {"error": ...}.

    The student's function runs as on a GPU (fake CUDA tensors; each launch recorded, not run) and each
    kernel is compiled at the num_warps and num_stages it is launched with (an autotuned kernel at its first
    config) by kernels.crosscompile, in a subprocess: this worker interprets Triton, the compiler needs
    TRITON_INTERPRET=0. The kernel is built in both
    BUILD_DTYPES at its first check, in one compiler process (kernels.crosscompile.run_requests), and the
    other dtype's check reads the answer this worker kept; each kernel apart, as its value tests gate it.
    Where the grader starts the builds beside the tests instead (gpu_builds_ahead, autograder.grading.ahead),
    every kernel's requests go to one process before any check asks, and each check still takes its answer
    only once its value test passed.
    """
    from kernels.crosscompile import run_requests

    key, requests = _build_requests(kernel, dtype, target)
    if key not in _BUILT:
        _BUILT[key] = dict(zip((r["dtype"] for r in requests), run_requests(requests)))
    return _BUILT[key][dtype]


def _build_requests(kernel: str, dtype: str, target: str) -> tuple[str, list[dict]]:
    """The compile requests of a build check (its kernel in each build dtype) and the key of their answers."""
    from kernels.crosscompile import GPU_KERNELS_CALLS

    calls = [dict(module=module, function=function, args=args, kwargs=kwargs)
             for module, function, args, kwargs in GPU_KERNELS_CALLS[kernel]]
    dtypes = BUILD_DTYPES if dtype in BUILD_DTYPES else (dtype,)
    return repr((kernel, target, dtypes)), [dict(calls=calls, dtype=one, target=target) for one in dtypes]


# The dtypes the build checks ask for (test_gpu_compile.py), built together; and this worker's answers (one
# worker grades one submission).
BUILD_DTYPES = ("bf16", "fp16")
_BUILT: dict[str, dict] = {}


# The grader's own work, with a CPU budget of its own (autograder.sandbox.process.RemoteStudent.run).
gpu_builds.cpu_budget = 300.0  # = kernels.crosscompile.BUILD_CPU_SECONDS (a test checks it)


def gpu_builds_ahead(calls: list) -> list:
    """gpu_builds(**call) for each of `calls`, in order: the grader asks for them all at once, beside the tests
    (autograder.grading.ahead). Every check's requests go to one compiler process (one start of torch and
    Triton for all), each request answered as alone (kernels.crosscompile.run_requests); then each call reads
    its answer as a check does."""
    from kernels.crosscompile.request import run_grouped

    run_grouped(_BUILT, [_build_requests(**call) for call in calls])
    return [gpu_builds(**call) for call in calls]


gpu_builds_ahead.cpu_budget = 300.0
gpu_builds.ahead = gpu_builds_ahead
# Its compile requests, for the reference's builds the grader keeps (autograder.grading.buildcache).
gpu_builds.requests = lambda **call: _build_requests(**call)[1]


# --- counting and measurement ------------------------------------------------------------------------


def profile_linear(size: int, k: int) -> list:
    """profile_top_ops of F.linear(x, w) without a bias, on (size, size) matrices: aten::linear wraps aten::mm."""
    from gpu_kernels.measure import profile_top_ops

    generator = torch.Generator().manual_seed(0)
    x, w = torch.randn(size, size, generator=generator), torch.randn(size, size, generator=generator)
    return profile_top_ops(F.linear, x, w, k=k)


def profile_calls(size: int, k: int) -> dict:
    """profile_top_ops of a function that counts its calls and adds two (size, size) matrices, multiplies them
    and takes a sigmoid of the product: {"calls": how often it ran, "top": what profile_top_ops returned}."""
    from gpu_kernels.measure import profile_top_ops

    generator = torch.Generator().manual_seed(size)
    x, w = torch.randn(size, size, generator=generator), torch.randn(size, size, generator=generator)
    calls = []

    def step(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return torch.sigmoid((a + b) @ b)

    top = profile_top_ops(step, x, w, k=k)
    return {"calls": len(calls), "top": top}


# ---- What each program loads, under Triton's interpreter (the design of §2 to §4: kernels.design) -------


def softmax_loads(x: torch.Tensor, block_size, device: str) -> dict:
    """kernels.design.softmax_loads of x on `device`."""
    from kernels import design

    return design.softmax_loads(x.to(interpreter_device(device)), block_size)


def gelu_shifted_loads(x: torch.Tensor, shift: int, device: str) -> dict:
    """kernels.design.gelu_shifted_loads of x on `device`."""
    from kernels import design

    return design.gelu_shifted_loads(x.to(interpreter_device(device)), shift)


def matmul_loads(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, activation, device: str) -> dict:
    """kernels.design.matmul_loads of a, b and the bias on `device`."""
    from kernels import design

    device = interpreter_device(device)
    return design.matmul_loads(a.to(device), b.to(device), bias.to(device), activation)


def tile_of(M: int, N: int, block_m: int, block_n: int, group_m: int, device: str):
    """kernels.design.tile_of: the tile the student's `_tile_of` gives each pid (None when compiled)."""
    from kernels import design

    return design.tile_of(M, N, block_m, block_n, group_m, interpreter_device(device))


def matmul_with_marked_gelu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, device: str):
    """kernels.design.matmul_with_marked_gelu of a, b and the bias on `device`."""
    from kernels import design

    device = interpreter_device(device)
    return design.matmul_with_marked_gelu(a.to(device), b.to(device), bias.to(device))


# Each counts under the interpreter: the grader runs it there on any machine.
softmax_loads.interpreted = gelu_shifted_loads.interpreted = matmul_loads.interpreted = True
tile_of.interpreted = matmul_with_marked_gelu.interpreted = True
