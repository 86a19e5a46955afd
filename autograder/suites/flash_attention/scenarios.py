"""Scenarios of the hidden flash_attention suite: each drives the student's code and returns plain data.

They run where the student's code runs (the grader's sandboxed worker), import the student's modules
inside their bodies and return only wire types. Inputs arrive as CPU tensors (or as a seed, for the
large ones) and results go back on the CPU. Each one reports what it observed, never a verdict: the
tests compare it with values computed on the trusted side.

Four observers are used besides the results themselves:
- `_AtenOps`, a dispatch mode that records the FLOPs of the matrix products run inside a block (mm,
  bmm, addmm, baddbmm, the ops every torch matmul, `@` and einsum end in, except an einsum whose
  contracted size is 1: an elementwise multiply);
- `kernels.host_ops.computing_ops`, the torch ops that compute (any aten op but allocations, views,
  copies and metadata) run by the host code of a Triton task;
- `_dots_per_program`, the `tl.dot` calls of each program of each kernel launched under Triton's
  interpreter (which runs the programs one after another in Python);
- `kernels.launches.record_launches` (Triton kernels launched) and `kernels.memory.MemoryTracker`.
All of it is what the student's code let the worker see: the grader may take points away for what
they show (masking instead of skipping), never give points for it alone.
"""

from contextlib import contextmanager

import kernels  # noqa: F401  (entering a dispatch mode imports Triton: select its mode first)
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernels.device import interpreter_device

# aten ops that are matrix products: the first matrix operand's position, for the contracted size.
_MATMULS = {"aten.mm": 0, "aten.bmm": 0, "aten.addmm": 1, "aten.baddbmm": 1}


class _AtenOps(TorchDispatchMode):
    """Records the FLOPs (2·m·n·p) of the matrix products run inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.matmul_flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = str(func.overloadpacket)
        if name in _MATMULS and isinstance(out, torch.Tensor):
            self.matmul_flops += 2 * out.numel() * args[_MATMULS[name]].shape[-1]
        return out


@contextmanager
def _dots_per_program():
    """Under Triton's interpreter, record each kernel launch in the block as {"grid": [x, y, z], "dots":
    [[x, y, z, tl.dot calls], ...]} (programs without a dot left out). Yields None when kernels are
    compiled (on a GPU), where nothing can be counted this way.

    How: the interpreter sets the grid of a launch (`set_grid_dim`), then runs each program after
    `set_grid_idx`, and every `tl.dot` ends in its builder's `create_dot`: both are wrapped on the
    builder's class and restored on exit.
    """
    from kernels.device import interpreted

    if not interpreted():
        yield None
        return
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    originals = {name: builder.__dict__[name] for name in ("set_grid_dim", "create_dot")}
    launches: list[dict] = []
    counts: list[dict] = []

    def set_grid_dim(self, *grid):
        launches.append({"grid": [int(g) for g in grid], "dots": []})
        counts.append({})
        return originals["set_grid_dim"](self, *grid)

    def create_dot(self, *args, **kwargs):
        if counts:
            program = tuple(int(i) for i in self.grid_idx)
            counts[-1][program] = counts[-1].get(program, 0) + 1
        return originals["create_dot"](self, *args, **kwargs)

    builder.set_grid_dim, builder.create_dot = set_grid_dim, create_dot
    try:
        yield launches
    finally:
        for name, original in originals.items():
            setattr(builder, name, original)
        for launch, found in zip(launches, counts):
            launch["dots"] = [[*program, n] for program, n in sorted(found.items())]


@contextmanager
def _one_thread():
    """Run torch single-threaded inside, as the grader's worker always does: the dispatch modes below see
    thousands of small ops, which idle OpenMP threads slow down many times over on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _on(device: str, *tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.to(device) for t in tensors]


def _cpu(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().to("cpu") for t in tensors]


def seeded_randn(seed: int, shapes: list, device: str, dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    """Standard normal tensors of `shapes` from one seeded generator on `device` (reproducible there)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn(*shape, generator=gen, device=device, dtype=dtype) for shape in shapes]


def pytorch_autograd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, is_causal: bool, device: str,
                     loss: str) -> dict:
    """_autograd through FlashAttentionPytorch."""
    from flash_attention.flash_pytorch import FlashAttentionPytorch

    return _autograd(FlashAttentionPytorch, q, k, v, do, is_causal, device, loss)


def triton_autograd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, is_causal: bool, device: str,
                    loss: str) -> dict:
    """_autograd through FlashAttentionTriton (its own scenario: the grader stops calling a scenario that
    crashed the worker twice, which must not cost the PyTorch tests)."""
    from flash_attention.flash_triton import FlashAttentionTriton

    return _autograd(FlashAttentionTriton, q, k, v, do, is_causal, device, loss)


def _autograd(function, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, is_causal: bool,
              device: str, loss: str) -> dict:
    """o of function.apply and the gradients autograd gets through it, with what it saved and launched.

    loss "do": the gradients of o for the upstream gradient do; loss "sum": of o.sum() (autograd then
    hands backward an expanded, stride-0 gradient of ones). Returns o, dq, dk, dv; `saved`, the shape
    and dtype of each tensor saved for backward; `rows`, the saved tensors of shape q.shape[:-1]; and
    the Triton kernels launched and the computing torch ops run in the forward and in the backward
    (the loss itself, o.sum(), is taken outside).
    """
    from kernels.host_ops import computing_ops
    from kernels.launches import record_launches
    from kernels.stores import accounts, package_dir, record_stores

    apply = function.apply
    leaves = [t.requires_grad_() for t in _on(device, q, k, v)]
    saved, rows = [], []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.append({"shape": list(tensor.shape), "dtype": tensor.dtype})
        if tuple(tensor.shape) == tuple(q.shape[:-1]):
            rows.append(tensor.detach().to("cpu", copy=True))
        return tensor

    with record_stores(package_dir("flash_attention")) as stores:
        with record_launches() as forward, computing_ops() as forward_ops:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
                o = apply(*leaves, is_causal)
        outputs, upstream = (o.sum(), None) if loss == "sum" else (o, do.to(device))
        with record_launches() as backward, computing_ops() as backward_ops:
            grads = torch.autograd.grad(outputs, leaves, upstream)
    o, dq, dk, dv = _cpu(o, *grads)
    return {"o": o, "dq": dq, "dk": dk, "dv": dv, "saved": saved, "rows": rows,
            "launches": {"forward": list(forward.names), "backward": list(backward.names)},
            "torch_ops": {"forward": forward_ops.names, "backward": backward_ops.names},
            "kernel_stores": accounts(stores, o=o, dq=dq, dk=dk, dv=dv)}


def pytorch_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool, q_tile: int, k_tile: int,
                    device: str) -> dict:
    """(o, lse) of flash_forward_pytorch on `device`."""
    from flash_attention.flash_pytorch import flash_forward_pytorch

    o, lse = flash_forward_pytorch(*_on(device, q, k, v), is_causal, q_tile=q_tile, k_tile=k_tile)
    o, lse = _cpu(o, lse)
    return {"o": o, "lse": lse}


def triton_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool, q_tile, k_tile,
                   device: str) -> dict:
    """(o, lse) of flash_forward_triton, the Triton kernels it launched and the computing torch ops it ran."""
    from kernels.host_ops import computing_ops
    from kernels.launches import record_launches

    from flash_attention.flash_triton import flash_forward_triton

    from kernels.stores import accounts, package_dir, record_stores

    q, k, v = _on(device, q, k, v)
    with record_launches() as launches, computing_ops() as ops, record_stores(package_dir("flash_attention")) as stores:
        o, lse = flash_forward_triton(q, k, v, is_causal=is_causal, q_tile=q_tile, k_tile=k_tile)
    o, lse = _cpu(o, lse)
    return {"o": o, "lse": lse, "launches": list(launches.names), "torch_ops": ops.names,
            "kernel_stores": accounts(stores, o=o, lse=lse)}


def triton_forward_dots(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_tile: int, k_tile: int,
                        device: str) -> dict:
    """flash_forward_triton without and with the causal mask: for each ("full", "causal"), o, lse and the
    launches with their tl.dot calls per program (`_dots_per_program`; None when not interpreted)."""
    device = interpreter_device(device)
    from flash_attention.flash_triton import flash_forward_triton

    q, k, v = _on(device, q, k, v)
    found = {}
    for mode, is_causal in (("full", False), ("causal", True)):
        with _dots_per_program() as launches:
            o, lse = flash_forward_triton(q, k, v, is_causal=is_causal, q_tile=q_tile, k_tile=k_tile)
        o, lse = _cpu(o, lse)
        found[mode] = {"o": o, "lse": lse, "launches": launches}
    return found


triton_forward_dots.interpreted = True  # counts under the interpreter: the grader runs it there on any machine


def triton_backward_dots(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, o: dict, lse: dict,
                         tile: int, device: str) -> dict:
    """flash_backward_triton without and with the causal mask, q_tile = k_tile = `tile`: for each ("full",
    "causal"), dq, dk, dv and the launches with their tl.dot calls per program (`_dots_per_program`; None
    when not interpreted). o and lse are {"full": ..., "causal": ...}, the forward's of each mode."""
    device = interpreter_device(device)
    from flash_attention.flash_triton import flash_backward_triton

    q, k, v, do = _on(device, q, k, v, do)
    found = {}
    for mode, is_causal in (("full", False), ("causal", True)):
        o_mode, lse_mode = _on(device, o[mode], lse[mode])
        with _dots_per_program() as launches:
            grads = flash_backward_triton(q, k, v, o_mode, lse_mode, do, is_causal=is_causal, q_tile=tile,
                                          k_tile=tile)
        dq, dk, dv = _cpu(*grads)
        found[mode] = {"dq": dq, "dk": dk, "dv": dv, "launches": launches}
    return found


triton_backward_dots.interpreted = True  # counts under the interpreter: the grader runs it there on any machine


def triton_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                    do: torch.Tensor, is_causal: bool, q_tile, k_tile, device: str) -> dict:
    """(dq, dk, dv) of flash_backward_triton, the Triton kernels it launched and the computing torch ops."""
    from kernels.host_ops import computing_ops
    from kernels.launches import record_launches

    from flash_attention.flash_triton import flash_backward_triton

    from kernels.stores import accounts, package_dir, record_stores

    inputs = _on(device, q, k, v, o, lse, do)
    with record_launches() as launches, computing_ops() as ops, record_stores(package_dir("flash_attention")) as stores:
        grads = flash_backward_triton(*inputs, is_causal=is_causal, q_tile=q_tile, k_tile=k_tile)
    dq, dk, dv = _cpu(*grads)
    return {"dq": dq, "dk": dk, "dv": dv, "launches": list(launches.names), "torch_ops": ops.names,
            "kernel_stores": accounts(stores, dq=dq, dk=dk, dv=dv)}


def _views(device: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """q (n_queries, heads, d) passed as its transpose (heads, n_queries, d): strides (d, heads·d, 1), the
    layout of heads split from one projection; k and v (n_keys, d) expanded to (heads, n_keys, d): stride 0
    over the heads, as one key/value head shared by every query head. Neither is dense."""
    q, k, v = _on(device, q, k, v)
    heads = q.shape[1]
    return q.transpose(0, 1), k.expand(heads, *k.shape), v.expand(heads, *v.shape)


def triton_forward_views(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool, q_tile, k_tile,
                         device: str) -> dict:
    """(o, lse) of flash_forward_triton on views that are not dense (_views), and the strides it was given."""
    from kernels.stores import accounts, package_dir, record_stores

    from flash_attention.flash_triton import flash_forward_triton

    q, k, v = _views(device, q, k, v)
    with record_stores(package_dir("flash_attention")) as stores:
        o, lse = flash_forward_triton(q, k, v, is_causal=is_causal, q_tile=q_tile, k_tile=k_tile)
    o, lse = _cpu(o, lse)
    return {"o": o, "lse": lse, "strides": [list(q.stride()), list(k.stride())],
            "kernel_stores": accounts(stores, o=o, lse=lse)}


def triton_backward_views(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                          do: torch.Tensor, is_causal: bool, q_tile, k_tile, device: str) -> dict:
    """(dq, dk, dv) of flash_backward_triton on q, k, v as views that are not dense (_views; o, lse and do
    dense), and the strides it was given."""
    from kernels.stores import accounts, package_dir, record_stores

    from flash_attention.flash_triton import flash_backward_triton

    q, k, v = _views(device, q, k, v)
    o, lse, do = _on(device, o, lse, do)
    with record_stores(package_dir("flash_attention")) as stores:
        grads = flash_backward_triton(q, k, v, o, lse, do, is_causal=is_causal, q_tile=q_tile, k_tile=k_tile)
    dq, dk, dv = _cpu(*grads)
    return {"dq": dq, "dk": dk, "dv": dv, "strides": [list(q.stride()), list(k.stride())],
            "kernel_stores": accounts(stores, dq=dq, dk=dk, dv=dv)}


triton_autograd.stores = triton_forward.stores = triton_backward.stores = True
triton_forward_views.stores = triton_backward_views.stores = True


# Atomic adds (the handout's dQ "with atomics") sum in the order the programs run: equal up to rounding.
ORDER_TOLERANCE = {"forward": dict(rtol=0.0, atol=0.0), "backward": dict(rtol=1e-4, atol=1e-5)}


def triton_program_order(part: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                         lse: torch.Tensor, do: torch.Tensor, is_causal: bool, q_tile: int, k_tile: int,
                         device: str):
    """What changes when the Triton `part` runs its programs in reversed and in shuffled order instead of the
    interpreter's increasing one (kernels.program_order.program_order_problems): "forward" (o, lse) of
    flash_forward_triton(q, k, v), "backward" (dq, dk, dv) of flash_backward_triton(q, k, v, o, lse, do),
    within ORDER_TOLERANCE. A list of problems, [] when nothing changes; None when compiled (on a GPU the
    hardware chooses the order)."""
    device = interpreter_device(device)
    from kernels.device import interpreted

    if not interpreted():
        return None
    from kernels.program_order import program_order_problems

    from flash_attention.flash_triton import flash_backward_triton, flash_forward_triton

    q, k, v, o, lse, do = _on(device, q, k, v, o, lse, do)
    tiles = dict(is_causal=is_causal, q_tile=q_tile, k_tile=k_tile)
    if part == "forward":
        return program_order_problems(lambda: flash_forward_triton(q, k, v, **tiles), "flash_forward_triton",
                                      **ORDER_TOLERANCE[part])
    return program_order_problems(lambda: flash_backward_triton(q, k, v, o, lse, do, **tiles),
                                  "flash_backward_triton", **ORDER_TOLERANCE[part])


triton_program_order.interpreted = True  # counts under the interpreter: the grader runs it there on any machine


def pytorch_matmul_flops(seed: int, n: int, head_dim: int, q_tile: int, k_tile: int) -> dict:
    """Matmul FLOPs of flash_forward_pytorch and of flash_backward_pytorch, causal and not (one head, n x n).

    Returns {"forward": {"full": int, "causal": int}, "backward": {...}}; the backward gets the
    forward's own o and lse (computed outside the count) and the same tiles.
    """
    from flash_attention.flash_pytorch import flash_backward_pytorch, flash_forward_pytorch

    q, k, v, do = seeded_randn(seed, [(1, n, head_dim)] * 4, "cpu")
    flops = {"forward": {}, "backward": {}}
    for mode, is_causal in (("full", False), ("causal", True)):
        with _one_thread(), _AtenOps() as forward:
            o, lse = flash_forward_pytorch(q, k, v, is_causal, q_tile=q_tile, k_tile=k_tile)
        with _one_thread(), _AtenOps() as backward:
            flash_backward_pytorch(q, k, v, o, lse, do, is_causal, q_tile=q_tile, k_tile=k_tile)
        flops["forward"][mode], flops["backward"][mode] = forward.matmul_flops, backward.matmul_flops
    return flops


def pytorch_forward_memory(seed: int, n_queries: int, n_keys: int, head_dim: int, is_causal: bool, q_tile: int,
                           k_tile: int) -> dict:
    """Largest tensor and peak live bytes created by flash_forward_pytorch (one head), measured on CPU, and
    what it returned (the grader checks that the memory bought the right answer)."""
    from kernels.memory import MemoryTracker

    from flash_attention.flash_pytorch import flash_forward_pytorch

    q, k, v = seeded_randn(seed, [(1, n_queries, head_dim), (1, n_keys, head_dim), (1, n_keys, head_dim)], "cpu")
    with _one_thread(), MemoryTracker("cpu") as mem:
        result = flash_forward_pytorch(q, k, v, is_causal, q_tile=q_tile, k_tile=k_tile)
    return {"largest_numel": mem.largest_numel, "peak_bytes": mem.peak_bytes, "result": result}


def pytorch_autograd_memory(seed: int, n: int, head_dim: int, is_causal: bool) -> dict:
    """Largest tensor and peak live bytes created by the backward autograd runs through
    FlashAttentionPytorch.apply (one head, n x n, default tiles), measured on CPU, and the gradients
    (dq, dk, dv) it gave. (The forward is flash_forward_pytorch's, which pytorch_forward_memory measures
    at cheaper tiles.)"""
    from kernels.memory import MemoryTracker

    from flash_attention.flash_pytorch import FlashAttentionPytorch

    q, k, v, do = seeded_randn(seed, [(1, n, head_dim)] * 4, "cpu")
    leaves = [t.requires_grad_() for t in (q, k, v)]
    o = FlashAttentionPytorch.apply(*leaves, is_causal)
    with _one_thread(), MemoryTracker("cpu") as mem:
        grads = torch.autograd.grad(o, leaves, do)
    return {"largest_numel": mem.largest_numel, "peak_bytes": mem.peak_bytes, "grads": list(grads)}


# ---- Timed on the trusted side (GPU) ------------------------------------------------------------------


def timed_triton(seed: int, lead: list, n: int, head_dim: int, dtype: torch.dtype, is_causal: bool,
                 backward: bool, iterations: int, check: int, head: int, rows: list, device: str) -> dict:
    """Run the student's Triton attention `iterations` times on fresh inputs; return one iteration's output.

    Iteration i draws q, k, v, do from seed + i with `_randn` on `device` (so the grader can draw the
    same ones) and runs flash_forward_triton (backward=False) or FlashAttentionTriton.apply and the
    gradients for do (backward=True). The grader times this whole call with its own clock; the device
    is synchronised before returning. For iteration `check` it returns the given `rows` of head `head`
    (of the flattened leading dims) of o, or of dq, dk and dv.
    """
    from flash_attention.flash_triton import FlashAttentionTriton, flash_forward_triton

    shape = (*lead, n, head_dim)
    kept = {}
    for i in range(iterations):
        q, k, v, do = seeded_randn(seed + i, [shape] * 4, device, dtype)
        if backward:
            leaves = [t.requires_grad_() for t in (q, k, v)]
            grads = torch.autograd.grad(FlashAttentionTriton.apply(*leaves, is_causal), leaves, do)
            outputs = dict(zip(("dq", "dk", "dv"), grads))
        else:
            outputs = {"o": flash_forward_triton(q, k, v, is_causal)[0]}
        if i == check:
            kept = outputs
    if device == "cuda":
        torch.cuda.synchronize()
    picked = [t.detach().reshape(-1, n, head_dim)[head, rows] for t in kept.values()]
    return dict(zip(kept, _cpu(*picked)))


# ---- Built for a GPU, on any machine ------------------------------------------------------------------


def triton_gpu_builds(dtype: str, target: str, part: str, lead: list, n: int, head_dim: int, is_causal: bool) -> dict:
    """The Triton kernels FlashAttentionTriton's `part` ("forward" or "backward") launches on a GPU, built
    for `target` in `dtype` ("bf16", "fp16"): {"launches": [...], "builds": [...]} or {"error": ...}.

    The student's forward and backward run as on a GPU (fake CUDA tensors of that dtype at these
    shapes, default tiles; each launch recorded, not run) and each kernel is compiled at the first of its
    autotune configs (kernels.crosscompile), in a subprocess: this worker interprets Triton, the compiler
    needs TRITON_INTERPRET=0. The subprocess inherits the worker's sandbox, limits and Triton cache.

    The part is built in both BUILD_DTYPES at its first check, in one compiler process (kernels.crosscompile.
    run_requests), and the other dtype's check reads the answer this worker kept: one start of torch and
    Triton per part, not per check. Asked so, parts are never built together: the backward's host code runs
    only for the backward's checks, which its value tests gate. Where the grader starts the builds beside
    the tests instead (triton_gpu_builds_ahead, autograder.grading.ahead), every part's requests go to one
    process before any check asks, and each check still takes its answer only once its value test passed.
    """
    from kernels.crosscompile import run_requests

    key, requests = _build_requests(dtype, target, part, lead, n, head_dim, is_causal)
    if key not in _BUILT:
        _BUILT[key] = dict(zip((r["dtype"] for r in requests), run_requests(requests)))
    answer = _BUILT[key][dtype]
    return answer if "error" in answer else answer.get(part, {"error": f"the compiler gave no answer for the {part}"})


def _build_requests(dtype: str, target: str, part: str, lead: list, n: int, head_dim: int,
                    is_causal: bool) -> tuple[str, list[dict]]:
    """The compile requests of a build check (its part in each build dtype) and the key of their answers."""
    case = dict(module="flash_attention.flash_triton", function="FlashAttentionTriton", target=target, parts=[part],
                lead=list(lead), n=n, head_dim=head_dim, is_causal=is_causal)
    dtypes = BUILD_DTYPES if dtype in BUILD_DTYPES else (dtype,)
    return repr(sorted(case.items())) + repr(dtypes), [{**case, "dtype": one} for one in dtypes]


# The dtypes the build checks ask for (test_gpu_compile.py), built together; and this worker's answers (one
# worker grades one submission).
BUILD_DTYPES = ("bf16", "fp16")
_BUILT: dict[str, dict] = {}


# The grader's own work, with a CPU budget of its own (autograder.sandbox.process.RemoteStudent.run).
triton_gpu_builds.cpu_budget = 300.0  # = kernels.crosscompile.BUILD_CPU_SECONDS (a test checks it)


def triton_gpu_builds_ahead(calls: list) -> list:
    """triton_gpu_builds(**call) for each of `calls`, in order: the grader asks for them all at once, beside the
    tests (autograder.grading.ahead). Every check's requests go to one compiler process (one start of torch and
    Triton for all), each request answered as alone (kernels.crosscompile.run_requests); then each call
    reads its answer as a check does."""
    from kernels.crosscompile.request import run_grouped

    run_grouped(_BUILT, [_build_requests(**call) for call in calls])
    return [triton_gpu_builds(**call) for call in calls]


triton_gpu_builds_ahead.cpu_budget = 300.0
triton_gpu_builds.ahead = triton_gpu_builds_ahead
# Its compile requests, for the reference's builds the grader keeps (autograder.grading.buildcache).
triton_gpu_builds.requests = lambda **call: _build_requests(**call)[1]
