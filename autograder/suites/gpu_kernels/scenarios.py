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

from contextlib import contextmanager

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
    """call()'s result on the CPU, the Triton kernels it launched and the computing torch ops it ran."""
    from kernels.host_ops import computing_ops
    from kernels.launches import record_launches

    with record_launches() as launches, computing_ops() as ops:
        result = call()
    out = result.detach().to("cpu") if isinstance(result, torch.Tensor) else result
    return {"out": out, "launches": list(launches.names), "torch_ops": ops.names}


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


# ---- What each program loads, under Triton's interpreter (the design of §2 to §4) -------------------


@contextmanager
def _loads_per_program(tensors: dict, program_shift: int = 0):
    """Under Triton's interpreter, record what each program of each kernel launched in the block loads
    from `tensors` (name -> tensor): yields a list, one entry per launch, {"grid": [x, y, z], "programs":
    [{"program": [x, y, z], "loads": [{name: [element index, ...] for each tensor it touched}, ...]}]},
    one dict per load call (its enabled lanes only; indices into the tensor's storage). Yields None when
    kernels are compiled (on a GPU), where nothing can be counted this way.

    program_shift: add it to every tl.program_id(0) the kernels read (the launched programs stay the
    same), so that a kernel believes it is a program far into a huge grid.

    How: the interpreter sets the grid of a launch (`set_grid_dim`), runs each program after `set_grid_idx`,
    and every tl.load ends in its builder's `create_masked_load` (`create_load` for an unmasked one); the
    program id comes from `create_get_program_id`. They are wrapped on the builder's class and restored.
    """
    from kernels.device import interpreted

    if not interpreted():
        yield None
        return
    import numpy as np
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    names = ("set_grid_dim", "set_grid_idx", "create_load", "create_masked_load", "create_get_program_id")
    originals = {name: builder.__dict__[name] for name in names}
    ranges = {name: (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes(), t.element_size())
              for name, t in tensors.items()}
    launches: list[dict] = []
    inside = []  # create_load calls create_masked_load in some Triton versions: record the outer call only

    def record(ptrs, mask) -> None:
        if not launches or not launches[-1]["programs"]:
            return
        addresses = np.asarray(ptrs.data, dtype=np.uint64)
        enabled = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
        loaded = addresses[enabled].astype(np.int64)
        found = {}
        for name, (start, size, itemsize) in ranges.items():
            inside_tensor = loaded[(loaded >= start) & (loaded < start + size)]
            if inside_tensor.size:
                found[name] = sorted(int(i) for i in (inside_tensor - start) // itemsize)
        launches[-1]["programs"][-1]["loads"].append(found)

    def set_grid_dim(self, *grid):
        launches.append({"grid": [int(g) for g in grid], "programs": []})
        return originals["set_grid_dim"](self, *grid)

    def set_grid_idx(self, *index):
        if launches:
            launches[-1]["programs"].append({"program": [int(i) for i in index], "loads": []})
        return originals["set_grid_idx"](self, *index)

    def create_load(self, ptrs, *args, **kwargs):
        record(ptrs, interpreter.TensorHandle(np.ones_like(ptrs.data, dtype=bool), None))
        inside.append(True)
        try:
            return originals["create_load"](self, ptrs, *args, **kwargs)
        finally:
            inside.pop()

    def create_masked_load(self, ptrs, mask, *args, **kwargs):
        if not inside:
            record(ptrs, mask)
        return originals["create_masked_load"](self, ptrs, mask, *args, **kwargs)

    def create_get_program_id(self, axis):
        handle = originals["create_get_program_id"](self, axis)
        if axis == 0 and program_shift:
            handle.data = (handle.data.astype(np.int64) + program_shift).astype(handle.data.dtype)
        return handle

    for name in names:
        setattr(builder, name, locals()[name])
    try:
        yield launches
    finally:
        for name, original in originals.items():
            setattr(builder, name, original)


def softmax_loads(x: torch.Tensor, block_size, device: str) -> dict:
    """softmax_triton(x, block_size) on `device`: its output and what each program loaded from x
    (_loads_per_program; "launches" None when compiled)."""
    device = interpreter_device(device)
    from gpu_kernels.softmax import softmax_triton

    x = x.to(device)
    with _loads_per_program({"x": x}) as launches:
        y = softmax_triton(x, block_size)
    return {"out": y.detach().to("cpu"), "launches": launches}


softmax_loads.interpreted = True  # counts under the interpreter: the grader runs it there on any machine


def gelu_shifted_loads(x: torch.Tensor, shift: int, device: str) -> dict:
    """gelu_triton(x) on `device` with every program id read as itself + `shift`: the launches and what each
    program loaded from x (None when compiled). With int32 offsets, pid · BLOCK wraps around past 2^31 and
    the shifted programs load x's first elements; with int64 offsets they are past the end, masked off."""
    device = interpreter_device(device)
    from gpu_kernels.elementwise import gelu_triton

    x = x.to(device)
    with _loads_per_program({"x": x}, program_shift=shift) as launches:
        gelu_triton(x)
    return {"launches": launches}


gelu_shifted_loads.interpreted = True  # counts under the interpreter: the grader runs it there on any machine


def matmul_loads(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, activation, device: str) -> dict:
    """matmul_triton(a, b, bias, activation) on `device`: its output and what each program loaded from a, b
    and the bias (_loads_per_program; None when compiled)."""
    device = interpreter_device(device)
    from gpu_kernels.matmul import matmul_triton

    a, b, bias = a.to(device), b.to(device), bias.to(device)
    with _loads_per_program({"a": a, "b": b, "bias": bias}) as launches:
        c = matmul_triton(a, b, bias, activation)
    return {"out": c.detach().to("cpu"), "launches": launches}


matmul_loads.interpreted = True  # counts under the interpreter: the grader runs it there on any machine


_STUDENT_TILE_OF = None  # the student's _tile_of, called by tile_of's probe kernel


def tile_of(M: int, N: int, block_m: int, block_n: int, group_m: int, device: str):
    """The (tile_m, tile_n) the student's `_tile_of(pid, M, N, block_m, block_n, group_m)` gives each pid of the
    grid cdiv(M, block_m) · cdiv(N, block_n), as a list of pairs, by a probe kernel that calls it; None when
    compiled (the probe calls the student's helper through a global, which only the interpreter re-reads)."""
    device = interpreter_device(device)
    global _STUDENT_TILE_OF
    from kernels.device import interpreted

    if not interpreted():
        return None
    import triton
    import triton.language as tl

    from gpu_kernels import matmul

    @triton.jit
    def _tile_probe(OUT, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        tile_m, tile_n = _STUDENT_TILE_OF(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        tl.store(OUT + 2 * pid, tile_m)
        tl.store(OUT + 2 * pid + 1, tile_n)

    programs = triton.cdiv(M, block_m) * triton.cdiv(N, block_n)
    out = torch.full((programs, 2), -1, dtype=torch.int32, device=device)
    _STUDENT_TILE_OF = matmul._tile_of
    try:
        _tile_probe[(programs,)](out, M, N, BLOCK_M=block_m, BLOCK_N=block_n, GROUP_M=group_m)
    finally:
        _STUDENT_TILE_OF = None
    return out.to("cpu").tolist()


tile_of.interpreted = True  # counts under the interpreter: the grader runs it there on any machine


def matmul_with_marked_gelu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, device: str):
    """matmul_triton(a, b, bias, "gelu") on `device` with elementwise.gelu_tanh (and every name of matmul.py
    bound to it) replaced by a marker that returns 7 everywhere: the output, all 7 when the epilogue calls
    gelu_tanh; None when compiled (a compiled kernel keeps the helper it was built with)."""
    device = interpreter_device(device)
    from kernels.device import interpreted

    if not interpreted():
        return None
    import triton

    from gpu_kernels import elementwise, matmul

    @triton.jit
    def _marker(x):
        return x * 0.0 + 7.0

    original = elementwise.gelu_tanh
    bound = [name for name, value in vars(matmul).items() if value is original]
    elementwise.gelu_tanh = _marker
    for name in bound:
        setattr(matmul, name, _marker)
    try:
        c = matmul.matmul_triton(a.to(device), b.to(device), bias.to(device), "gelu")
    finally:
        elementwise.gelu_tanh = original
        for name in bound:
            setattr(matmul, name, original)
    return c.detach().to("cpu")


matmul_with_marked_gelu.interpreted = True  # counts under the interpreter: the grader runs it there on any machine
