"""Build Triton kernels for a named NVIDIA GPU on a machine without one, and report on each build.

    python -m kernels.crosscompile                       # every kernel of solutions/ and kernels/, the full matrix
    python -m kernels.crosscompile --quick               # sm_90, bf16, d 64, each kernel's default config
    python -m kernels.crosscompile --request IN --out OUT  # JSON in, JSON out (the grader's compile check)

Triton compiles for a target named by its compute capability with no GPU and no driver: ptxas and
cuobjdump ship in the triton wheel. Per build the report says: whether it compiled (or the
compiler's message and the kernel's source line), the shared memory it needs against the
architecture's per-block limit (kernels.hardware.SHARED_MEMORY_PER_BLOCK; Triton checks it only at
launch), whether the PTX has tensor-core instructions (mma.sync, wgmma, tcgen05) where the kernel
has a dot, registers and stack bytes per thread (register spills) from the cubin, and the seconds it
took. Spills are reported, not failed: they cost speed, not correctness. Builds
are cached in Triton's cache (TRITON_CACHE_DIR), so a rerun takes seconds.

Which kernels, with which argument types and constexprs: host code is run as on a GPU (fake CUDA
tensors of the chosen dtype: torch's FakeTensorMode, no memory and no device) and each launch is
recorded, not run (kernels.launches, dry run). So the types, constexprs and tile sizes are those the
code would really launch on a GPU, bf16 inputs included. An autotuned kernel is built at each of its
configs.

This must run in a process where Triton compiles, not interprets. Importing `kernels` sets
TRITON_INTERPRET=1 on a machine without CUDA, so the command line is the entry point: it sets
TRITON_INTERPRET=0 before Triton is imported (and refuses if Triton was already imported interpreted).
An interpreted process (the grader's worker on a CPU) runs it as a subprocess: `run_request`.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

TARGETS = {"sm_80": 80, "sm_90": 90, "sm_100": 100}
DTYPES = ("bf16", "fp16")
# (PTX opcode prefix, name): the tensor-core instructions of each generation.
TENSOR_CORE_OPS = (("tcgen05.mma", "tcgen05"), ("wgmma.mma_async", "wgmma"), ("mma.sync", "mma.sync"))
# Triton's launch defaults, used for a kernel launched without options and not autotuned.
DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}
ROOT = Path(__file__).resolve().parents[1]


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def require_compiler() -> None:
    if interpreted():
        raise RuntimeError("kernels.crosscompile needs Triton's compiler, but TRITON_INTERPRET is set in this "
                           "process: run `python -m kernels.crosscompile` (it sets TRITON_INTERPRET=0), or call "
                           "run_request() from an interpreted process")


# ---- Recording what host code would launch on a GPU ----------------------------------------------


def gpu_launches(call: Callable[[Callable], object]) -> list[dict]:
    """The launches `call(make)` makes as on a GPU; `make(*shape, dtype=...)` gives fake CUDA tensors.

    Nothing runs on a device and no memory is allocated: tensors are torch fake tensors on "cuda", and
    each kernel launch is recorded (kernels.launches, dry run) instead of run.
    """
    require_compiler()
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernels.launches import record_launches

    def make(*shape, dtype=torch.bfloat16):
        return torch.empty(*shape, dtype=dtype, device="cuda")

    with FakeTensorMode(allow_non_fake_inputs=True), record_launches(dry_run=True) as record:
        call(make)
    return record.launches


def unique_launches(launches: list[dict]) -> list[dict]:
    """Launches with the same kernel, types, constexprs and options counted once, in first-seen order."""
    seen, kept = set(), []
    for launch in launches:
        key = json.dumps(launch, sort_keys=True)
        if key not in seen:
            seen.add(key)
            kept.append(launch)
    return kept


# ---- One build -------------------------------------------------------------------------------------


@dataclass
class Build:
    """One kernel at one target, signature, constexprs and (num_warps, num_stages)."""

    module: str
    kernel: str
    target: str
    signature: dict
    constexprs: dict
    num_warps: int
    num_stages: int
    label: str = ""  # what the caller calls this case ("bf16 d 64 causal")


@dataclass
class BuildResult:
    module: str
    kernel: str
    target: str
    label: str
    num_warps: int
    num_stages: int
    ok: bool = False
    error: str = ""  # the compiler's message, first lines
    where: str = ""  # file:line of the kernel source the message points at
    source_line: str = ""
    shared_bytes: int | None = None
    shared_limit: int | None = None
    dots: int = 0  # tt.dot ops in the Triton IR
    tensor_cores: str = ""  # the tensor-core instruction found in the PTX, "" if none
    registers: int | None = None
    spill_bytes: int | None = None  # stack frame per thread (register spills, local arrays): cuobjdump's STACK
    seconds: float = 0.0
    notes: list = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.shared_bytes is not None and self.shared_bytes <= self.shared_limit

    def problems(self) -> list[str]:
        """What is wrong with this build for a GPU, in words; empty when nothing is."""
        return build_problems(asdict(self), self.shared_limit)

    def to_dict(self) -> dict:
        return {**asdict(self), "fits": self.fits, "problems": self.problems()}


def report_problems(answer, where: str, target: str, shared_limit: int, tensor_cores: str | None = None) -> list[str]:
    """What stops the kernels in a worker's build report (plain data: {"launches", "builds"} or {"error"})
    from running on `target`, each problem prefixed by `where`. tensor_cores: the message to add when no
    build has a tl.dot on the tensor cores (None: no dot is required)."""
    if not isinstance(answer, dict):
        return [f"{where}: the build report is not a dict"]
    if "error" in answer:
        return [f"{where}: {answer['error']}"]
    launches, builds = answer.get("launches"), answer.get("builds")
    if not isinstance(launches, list) or not isinstance(builds, list):
        return [f"{where}: the build report has no launches or builds"]
    if not launches:
        return [f"{where}: launched no Triton kernel"]
    built = {b.get("kernel") for b in builds if isinstance(b, dict)}
    missing = sorted({launch.get("name") for launch in launches if isinstance(launch, dict)} - built)
    found = [f"{where}: kernel {name} was launched but not built" for name in missing]
    for b in builds:
        if not isinstance(b, dict) or b.get("target") != target:
            found.append(f"{where}: a build for another target was reported")
            continue
        found += [f"{b.get('kernel')} ({where}): {problem}" for problem in build_problems(b, shared_limit)]
    if tensor_cores and not any(isinstance(b, dict) and b.get("dots") and b.get("tensor_cores") for b in builds):
        found.append(f"{where}: {tensor_cores}")
    return found


def build_problems(result: dict, shared_limit: int) -> list[str]:
    """What is wrong with one build (a BuildResult as plain data) for a GPU whose blocks may use
    `shared_limit` bytes of shared memory; empty when nothing is. A pure function of the data, so that
    the grader can judge a build reported by an untrusted process against its own limit."""
    target = result.get("target", "the GPU")
    if not result.get("ok"):
        where = result.get("where") or ""
        line = result.get("source_line") or ""
        at = f" (at {where}: {line})" if where else ""
        return [f"does not compile for {target}: {result.get('error') or 'no message'}{at}"]
    found = []
    shared = result.get("shared_bytes")
    if not isinstance(shared, int) or shared > shared_limit:
        found.append(f"shared memory {shared / 1024:.0f} KiB > {shared_limit // 1024} KiB on {target}: smaller "
                     "tiles or fewer stages" if isinstance(shared, int) else "no shared-memory size reported")
    if result.get("dots") and not result.get("tensor_cores"):
        found.append(f"{result['dots']} tl.dot without tensor-core instructions on {target}: give tl.dot "
                     "bf16/fp16 operands (not fp32 with input_precision=\"ieee\") so it uses the tensor cores")
    return found


def jit_function(module_name: str, kernel_name: str):
    """The JITFunction named `kernel_name` in the module (autotune and heuristics wrappers unwrapped)."""
    import importlib

    from triton.runtime.jit import JITFunction

    obj = getattr(importlib.import_module(module_name), kernel_name)
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn"):
        obj = obj.fn
    if not isinstance(obj, JITFunction):
        raise TypeError(f"{module_name}.{kernel_name} is not a @triton.jit kernel")
    return obj


def _compile_error(exc: BaseException, fn) -> tuple[str, str, str]:
    """(message, where, source) of a Triton CompilationError: where and source follow the chain of calls
    from the kernel down to the failing line ("flash_triton.py:150 -> flash_triton.py:91")."""
    from triton.compiler.errors import CompilationError

    chain = [exc]
    while isinstance(chain[-1].__cause__, CompilationError):
        chain.append(chain[-1].__cause__)
    message = (getattr(chain[-1], "error_message", None) or str(chain[-1])).strip()
    places, lines = [], []
    for error in chain:
        node, src = getattr(error, "node", None), getattr(error, "src", None)
        if not src or not hasattr(node, "lineno"):
            continue
        text = src.split("\n")
        line = text[node.lineno - 1].strip() if 1 <= node.lineno <= len(text) else ""
        found = _locate(src, fn)
        places.append(f"{Path(found[0]).name}:{found[1] + node.lineno - 1}" if found else f"line {node.lineno}")
        lines.append(line)
    return _short(message), " -> ".join(places), " -> ".join(lines)


def _locate(src: str, fn) -> tuple[str, int] | None:
    """(file, line of the `def`) of the @triton.jit function whose source is `src`, in fn's module."""
    import importlib

    module = importlib.import_module(fn.fn.__module__)
    path = inspect.getsourcefile(module)
    if path is None:
        return None
    text = Path(path).read_text()
    head = src.lstrip().split("\n", 1)[0]
    index = text.find(head)
    return (path, text.count("\n", 0, index) + 1) if index >= 0 else None


def _short(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= 400 else message[:397] + "..."


def explain(message: str) -> str:
    """The compiler's message, with what to do for the mistakes students make most."""
    match = (re.search(r"[Bb]oth operands must be same dtype\. Got (\w+) and (\w+)", message)
             or re.search(r"[Ff]irst input \((\w+)\) and second input \((\w+)\) must have the same dtype", message))
    if match:
        a, b = match.groups()
        return (f"tl.dot operands are {a} and {b}: cast the fp32 one (P or dS) to the other's dtype "
                f"(p.to(v.dtype)) before tl.dot. Compiler: {message}")
    return message


def _resource_usage(cubin: bytes, kernel: str) -> tuple[int | None, int | None]:
    """(registers, stack bytes per thread) of the kernel from `cuobjdump --dump-resource-usage` on its cubin.
    The stack frame is where ptxas puts the registers it spills (and local arrays); 0 means no spill."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        return None, None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            out = subprocess.run([str(tool), "--dump-resource-usage", f.name], capture_output=True, text=True,
                                 timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None, None
    regs, local = re.search(r"REG:(\d+)", out), re.search(r"STACK:(\d+)", out)
    return (int(regs.group(1)) if regs else None), (int(local.group(1)) if local else None)


def build(spec: Build) -> BuildResult:
    """Compile one kernel for spec.target; never raises for a kernel's fault (the result says)."""
    require_compiler()
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernels.hardware import SHARED_MEMORY_PER_BLOCK

    result = BuildResult(spec.module, spec.kernel, spec.target, spec.label, spec.num_warps, spec.num_stages,
                         shared_limit=SHARED_MEMORY_PER_BLOCK[spec.target])
    started = time.perf_counter()
    try:
        fn = jit_function(spec.module, spec.kernel)
    except Exception as exc:  # noqa: BLE001  (a missing or broken kernel is reported, not raised)
        result.error = _short(f"{type(exc).__name__}: {exc}")
        return result
    source = ASTSource(fn=fn, signature=dict(spec.signature), constexprs=dict(spec.constexprs))
    target = GPUTarget("cuda", TARGETS[spec.target], 32)
    try:
        compiled = triton.compile(source, target=target,
                                  options={"num_warps": spec.num_warps, "num_stages": spec.num_stages})
    except Exception as exc:  # noqa: BLE001
        from triton.compiler.errors import CompilationError

        if isinstance(exc, CompilationError):
            message, result.where, result.source_line = _compile_error(exc, fn)
        else:
            message = f"{type(exc).__name__}: {_short(str(exc))}"
        result.error = explain(message)
        result.seconds = time.perf_counter() - started
        return result
    result.ok = True
    result.shared_bytes = int(compiled.metadata.shared)
    result.dots = len(re.findall(r"\btt\.dot(?:_scaled)?\b", compiled.asm.get("ttir", "")))
    ptx = compiled.asm.get("ptx", "")
    result.tensor_cores = next((name for op, name in TENSOR_CORE_OPS if op in ptx), "")
    result.registers, result.spill_bytes = _resource_usage(compiled.asm["cubin"], spec.kernel)
    result.seconds = time.perf_counter() - started
    return result


def builds_for(launch: dict, target: str, label: str = "", all_configs: bool = True) -> list[Build]:
    """The builds of one recorded launch for `target`: one per autotune config (or only the first),
    else one at the launch's own options (Triton's defaults where it gave none)."""
    if "args" not in launch:
        raise ValueError(f"{launch['name']}: its launch could not be described ({launch.get('error')})")
    signature, constexprs = {}, {}
    for arg in launch["args"]:
        if "constexpr" in arg:
            signature[arg["name"]] = "constexpr"
            constexprs[arg["name"]] = arg["constexpr"]
        else:
            if arg.get("type") is None:
                raise ValueError(f"{launch['name']}: argument {arg['name']} has no Triton type ({arg.get('error')})")
            signature[arg["name"]] = arg["type"]
    configs = launch.get("configs") or [{"kwargs": {}, **DEFAULT_OPTIONS, **launch.get("options", {})}]
    if not all_configs:
        configs = configs[:1]
    found = []
    for config in configs:
        options = {**DEFAULT_OPTIONS, **{k: config[k] for k in DEFAULT_OPTIONS if k in config}}
        found.append(Build(launch["module"], launch["name"], target, signature,
                           {**constexprs, **config.get("kwargs", {})}, options["num_warps"], options["num_stages"],
                           label))
    return found


# ---- The project's own kernels: what `make gpu-compile` builds -----------------------------------


class _Context:
    """What FlashAttentionTriton's forward and backward use of autograd's ctx. Autograd itself cannot
    run on fake CUDA tensors in a CPU build of torch (it aborts), so forward and backward are called
    directly, in the order autograd would call them."""

    needs_input_grad = (True, True, True, False)

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


def autograd_function_call(function, make, shape: tuple, dtype, is_causal: bool) -> None:
    """function.forward then function.backward (an autograd.Function's), on fake tensors of `shape`."""
    ctx = _Context()
    q, k, v = (make(*shape, dtype=dtype) for _ in range(3))
    function.forward(ctx, q, k, v, is_causal)
    function.backward(ctx, make(*shape, dtype=dtype))


def _torch_dtype(name: str):
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}[name]


def flash_attention_call(tree: str, dtype: str, head_dim: int, is_causal: bool, n: int = 256):
    """A call that runs tree's FlashAttentionTriton forward and backward (default tiles) as on a GPU."""

    def call(make):
        import importlib

        from kernels import impl

        impl.activate(impl.resolve(tree, ROOT))
        function = importlib.import_module("flash_attention.flash_triton").FlashAttentionTriton
        autograd_function_call(function, make, (1, 2, n, head_dim), _torch_dtype(dtype), is_causal)

    return call


def demos_call(dtype: str):
    def call(make):
        from kernels import demos

        x = make(4096, dtype=_torch_dtype(dtype))
        demos.add(x, x)
        demos.gelu(x)

    return call


# gpu_kernels' entry points at the shapes they are built for: {name: [(module, function, tensor shapes,
# keyword arguments), ...]}; every tensor in the build's dtype. The softmax twice: rows in one block
# and rows longer than the largest block (another constexpr, another kernel).
GPU_KERNELS_CALLS = {
    "gelu": [("gpu_kernels.elementwise", "gelu_triton", [[4096, 4096]], {})],
    "softmax": [("gpu_kernels.softmax", "softmax_triton", [[1024, 1000]], {}),
                ("gpu_kernels.softmax", "softmax_triton", [[1024, 16384]], {})],
    "matmul": [("gpu_kernels.matmul", "matmul_triton", [[4096, 4096], [4096, 4096], [4096]], {"activation": "gelu"}),
               ("gpu_kernels.matmul", "matmul_triton", [[4096, 4096], [4096, 4096]], {})],
}


def run_calls(calls: list, make, dtype: str) -> None:
    """Call each (module, function, shapes, kwargs) on fake tensors of those shapes in `dtype`."""
    import importlib

    for module, function, shapes, kwargs in calls:
        getattr(importlib.import_module(module), function)(*(make(*s, dtype=_torch_dtype(dtype)) for s in shapes),
                                                           **kwargs)


def gpu_kernels_call(tree: str, dtype: str):
    """A call that runs tree's gpu_kernels entry points (GPU_KERNELS_CALLS) as on a GPU."""

    def call(make):
        from kernels import impl

        impl.activate(impl.resolve(tree, ROOT))
        run_calls([c for calls in GPU_KERNELS_CALLS.values() for c in calls], make, dtype)

    return call


def matrix(targets, dtypes, head_dims, all_configs: bool, tree: str = "solutions") -> list[Build]:
    """Every build of the project's kernels: FlashAttention causal (at every autotune config) and not
    causal (at the first: the same code as the causal kernels' unmasked loop), the demos, and
    gpu_kernels' GeLU, softmax and matmul (GPU_KERNELS_CALLS)."""
    builds = []
    for dtype in dtypes:
        cases = [(f"{dtype} d {d} {'causal' if causal else 'full'}", flash_attention_call(tree, dtype, d, causal),
                  all_configs and causal) for d in head_dims for causal in (True, False)]
        cases.append((f"{dtype}", demos_call(dtype), all_configs))
        cases.append((f"{dtype} gpu_kernels", gpu_kernels_call(tree, dtype), all_configs))
        for label, call, every_config in cases:
            for launch in unique_launches(gpu_launches(call)):
                for target in targets:
                    builds += builds_for(launch, target, label, every_config)
    seen, kept = set(), []
    for b in builds:  # a kernel without the causal flag (the preprocess) appears in both cases: build once
        key = json.dumps([b.module, b.kernel, b.target, b.signature, b.constexprs, b.num_warps, b.num_stages],
                         sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            kept.append(b)
    return kept


def run_builds(builds: list[Build], jobs: int, progress: bool = False) -> list[BuildResult]:
    """Build each, `jobs` at a time; with `progress`, a line per build on stderr as it finishes."""
    from concurrent.futures import ProcessPoolExecutor

    def report(results):
        for i, r in enumerate(results, 1):
            if progress:
                print(f"[{i}/{len(builds)}] {r.kernel} {r.target} {r.label} {r.num_warps}w{r.num_stages}s: "
                      f"{_verdict(r)} ({r.seconds:.1f} s)", file=sys.stderr, flush=True)
            yield r

    if jobs <= 1:
        return list(report(build(b) for b in builds))
    with ProcessPoolExecutor(jobs) as pool:
        return list(report(pool.map(build, builds)))


def _verdict(r: BuildResult) -> str:
    return "FAILED" if not r.ok else ("; ".join(r.problems()) or "ok")


def print_table(results: list[BuildResult], every_build: bool) -> None:
    """One row per kernel and target (builds, worst shared memory, registers, seconds), or per build."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    if every_build:
        table = Table(title="Triton kernels built for GPUs (no GPU needed): every build")
        for column in ("kernel", "case", "target", "warps", "stages", "result", "shared KiB", "limit",
                       "tensor cores", "regs", "stack B", "s"):
            table.add_column(column, justify="left" if column in ("kernel", "case", "result") else "right")
        for r in results:
            table.add_row(r.kernel, r.label, r.target, str(r.num_warps), str(r.num_stages), _verdict(r),
                          "" if r.shared_bytes is None else f"{r.shared_bytes / 1024:.1f}", str(r.shared_limit // 1024),
                          r.tensor_cores or ("-" if not r.dots else "NONE"), _num(r.registers), _num(r.spill_bytes),
                          f"{r.seconds:.1f}")
        console.print(table)
    groups: dict[tuple, list[BuildResult]] = {}
    for r in results:
        groups.setdefault((r.kernel, r.target), []).append(r)
    table = Table(title="Triton kernels built for GPUs (no GPU needed): per kernel and target, over dtypes, "
                        "head dims and configs")
    for column in ("kernel", "target", "builds", "ok", "max shared KiB", "limit", "tensor cores", "max regs",
                   "max stack B", "max s"):
        table.add_column(column, justify="left" if column == "kernel" else "right")
    for (kernel, target), rs in groups.items():
        built = [r for r in rs if r.ok]
        cores = sorted({r.tensor_cores for r in built if r.dots}) or (["NONE"] if any(r.dots for r in rs) else ["-"])
        table.add_row(kernel, target, str(len(rs)), str(sum(not r.problems() for r in rs)),
                      _num(max((r.shared_bytes for r in built), default=None), 1024), str(rs[0].shared_limit // 1024),
                      ",".join(c or "NONE" for c in cores), _num(max((r.registers or 0 for r in built), default=None)),
                      _num(max((r.spill_bytes or 0 for r in built), default=None)),
                      f"{max(r.seconds for r in rs):.1f}")
    console.print(table)
    for r in results:
        if r.problems():
            print(f"{r.kernel} ({r.label}, {r.target}, {r.num_warps} warps, {r.num_stages} stages): "
                  + "; ".join(r.problems()))


def _num(value, scale: int = 1) -> str:
    return "" if value is None else (f"{value / scale:.1f}" if scale != 1 else str(value))


# ---- The grader's request: a student's functions, compiled in a subprocess -----------------------


def student_parts(request: dict) -> dict:
    """{"forward": launches, "backward": launches} of the student's FlashAttentionTriton run as on a GPU,
    or {part: "error message"} for a part whose host code failed (the backward needs the forward)."""
    import importlib

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernels.launches import record_launches

    function = getattr(importlib.import_module(request["module"]), request["function"])
    shape = (*request["lead"], request["n"], request["head_dim"])
    dtype = _torch_dtype(request["dtype"])
    ctx, parts = _Context(), {}
    with FakeTensorMode(allow_non_fake_inputs=True):
        q, k, v, do = (torch.empty(*shape, dtype=dtype, device="cuda") for _ in range(4))
        for part, step in (("forward", lambda: function.forward(ctx, q, k, v, request["is_causal"])),
                           ("backward", lambda: function.backward(ctx, do))):
            try:
                with record_launches(dry_run=True) as record:
                    step()
            except Exception as exc:  # noqa: BLE001  (the student's host code failed: report it)
                parts[part] = f"{request['function']}.{part} failed when run as on a GPU: {type(exc).__name__}: " \
                              f"{_short(str(exc))}"
                if part == "forward":
                    parts["backward"] = "not run: the forward failed"
                    break
            else:
                parts[part] = unique_launches(record.launches)
    return parts


def student_calls(request: dict) -> dict:
    """{"launches": [...], "builds": [...]} of the calls request["calls"] (each {"module", "function",
    "args": tensor shapes, "kwargs"}) run as on a GPU on tensors of request["dtype"], built for
    request["target"] at each kernel's first config (every config with all_configs); or {"error": ...}."""
    import importlib

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernels.launches import record_launches

    dtype = _torch_dtype(request["dtype"])
    launches = []
    for call in request["calls"]:
        where = f"{call['module']}.{call['function']}"
        try:
            function = getattr(importlib.import_module(call["module"]), call["function"])
            with FakeTensorMode(allow_non_fake_inputs=True), record_launches(dry_run=True) as record:
                function(*(torch.empty(*shape, dtype=dtype, device="cuda") for shape in call["args"]),
                         **call.get("kwargs", {}))
        except Exception as exc:  # noqa: BLE001  (the student's host code failed: report it)
            return {"error": f"{where} failed when run as on a GPU: {type(exc).__name__}: {_short(str(exc))}"}
        launches += record.launches
    launches = unique_launches(launches)
    try:
        specs = [spec for launch in launches for spec in
                 builds_for(launch, request["target"], request["dtype"], request.get("all_configs", False))]
    except ValueError as exc:
        return {"error": str(exc), "launches": launches}
    return {"launches": launches, "builds": [build(spec).to_dict() for spec in specs]}


def answer_request(request: dict) -> dict:
    """For each part asked for (request["parts"], default both of "forward" and "backward"):
    {"launches": [...], "builds": [...]} or {"error": "..."}.

    The request: module and function (an autograd.Function with static forward and backward), dtype
    ("bf16", "fp16"), target ("sm_90"), lead dims, n, head_dim, is_causal, and all_configs (build every
    autotune config, not only the first). A request with "calls" (plain functions, gpu_kernels') is
    answered by student_calls instead."""
    if "calls" in request:
        return student_calls(request)
    answer = {}
    wanted = request.get("parts", ("forward", "backward"))
    for part, launches in student_parts(request).items():
        if part not in wanted:
            continue
        if isinstance(launches, str):
            answer[part] = {"error": launches}
            continue
        try:
            specs = [spec for launch in launches for spec in
                     builds_for(launch, request["target"], request["dtype"], request.get("all_configs", False))]
        except ValueError as exc:
            answer[part] = {"error": str(exc), "launches": launches}
            continue
        answer[part] = {"launches": launches, "builds": [build(spec).to_dict() for spec in specs]}
    return answer


def run_request(request: dict, timeout: float = 300.0) -> dict:
    """Answer `request` in a fresh Python process where Triton compiles (TRITON_INTERPRET=0).

    For interpreted processes (the grader's worker on a CPU). The subprocess inherits this process's
    import path, limits, sandbox and TRITON_CACHE_DIR; its result comes back through a file, so that what the code
    prints cannot corrupt it.
    """
    with tempfile.TemporaryDirectory() as scratch:
        inbox, outbox = Path(scratch) / "request.json", Path(scratch) / "answer.json"
        inbox.write_text(json.dumps(request))
        # This process's import path (the submission or tree included), so the child imports the same modules.
        path = os.pathsep.join(p for p in sys.path if p and Path(p).is_dir())
        env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": path}
        try:
            done = subprocess.run([sys.executable, "-m", "kernels.crosscompile", "--request", str(inbox), "--out",
                                   str(outbox)], env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"compiling took more than {timeout:.0f} s"}
        if not outbox.exists():
            tail = (done.stderr or done.stdout)[-1500:]
            return {"error": f"the compiler process ended without an answer (exit {done.returncode}): {tail}"}
        return json.loads(outbox.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated: sm_80,sm_90,sm_100")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated: bf16,fp16")
    parser.add_argument("--head-dims", default="64,80,128", help="comma-separated head dims")
    parser.add_argument("--quick", action="store_true", help="sm_90, bf16, d 64, each kernel's first config")
    parser.add_argument("--first-config", action="store_true", help="only each autotuned kernel's first config")
    parser.add_argument("--impl", default=os.environ.get("LLMSYS_IMPL") or ("solutions" if (ROOT / "solutions").is_dir()
                        else "assignments"), help="tree of the FlashAttention: solutions, assignments or a path")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1) // 2), help="builds in parallel")
    parser.add_argument("--every-build", action="store_true", help="print a row per build, not per kernel")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--request", type=Path, help="answer a JSON compile request (the grader's)")
    parser.add_argument("--out", type=Path, help="with --request: where to write the JSON answer")
    args = parser.parse_args(argv)
    if interpreted() and "triton" in sys.modules:
        parser.error("Triton was imported interpreted (TRITON_INTERPRET=1) before kernels.crosscompile ran; "
                     "run `python -m kernels.crosscompile` in its own process")
    os.environ["TRITON_INTERPRET"] = "0"  # importing `kernels` set it to 1 without CUDA: builds need the compiler
    if args.request:
        if not args.out:
            parser.error("--request needs --out")
        answer = answer_request(json.loads(args.request.read_text()))
        args.out.write_text(json.dumps(answer))
        return 0
    if args.quick:
        targets, dtypes, head_dims, all_configs = ["sm_90"], ["bf16"], [64], False
    else:
        targets, dtypes = args.targets.split(","), args.dtypes.split(",")
        head_dims, all_configs = [int(d) for d in args.head_dims.split(",")], not args.first_config
    unknown = [t for t in targets if t not in TARGETS] + [d for d in dtypes if d not in DTYPES]
    if unknown:
        parser.error(f"unknown target or dtype {unknown}; targets {list(TARGETS)}, dtypes {list(DTYPES)}")
    started = time.perf_counter()
    builds = matrix(targets, dtypes, head_dims, all_configs, args.impl)
    results = run_builds(builds, args.jobs, progress=not args.quick)
    print_table(results, args.every_build or args.quick)
    failed = [r for r in results if r.problems()]
    print(f"{len(results)} builds in {time.perf_counter() - started:.0f} s: {len(results) - len(failed)} ok, "
          f"{len(failed)} with problems")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([r.to_dict() for r in results], indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
