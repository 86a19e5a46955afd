"""Building: one recorded launch compiled with triton.compile for a named GPU (GPUTarget), no GPU needed.

Per build the result says whether it compiled (or the compiler's message and the kernel's source
line), the shared memory it needs, the tl.dot ops and whether the PTX has tensor-core instructions
(mma.sync, wgmma, tcgen05), the bits each global load moves per thread (128 for a vector load of 16
bytes), registers and stack bytes per thread (register spills) from the cubin (cuobjdump ships in the
triton wheel), and the seconds it took. Builds are cached in Triton's cache
(TRITON_CACHE_DIR), so a rerun takes seconds. Judging a build is kernels.crosscompile.report's.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernels.crosscompile.dryrun import require_compiler
from kernels.crosscompile.loads import global_load_bits
from kernels.crosscompile.offsets import int32_offsets
from kernels.crosscompile.report import build_problems, shorten, verdict
from kernels.hardware import TARGETS
# (PTX opcode prefix, name): the tensor-core instructions of each generation.
TENSOR_CORE_OPS = (("tcgen05.mma", "tcgen05"), ("wgmma.mma_async", "wgmma"), ("mma.sync", "mma.sync"))
# Triton's launch defaults, used for a kernel launched without options and not autotuned.
DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}


@dataclass
class Build:
    """One kernel at one target, signature, constexprs and (num_warps, num_stages), specialised as the
    launch was (kernels.launches.specialization): `divisible` names the arguments a GPU launch marks
    `tt.divisibility = 16`; arguments equal to 1 are among the constexprs."""

    module: str
    kernel: str
    target: str
    signature: dict
    constexprs: dict
    num_warps: int
    num_stages: int
    label: str = ""  # what the caller calls this case ("bf16 d 64 causal")
    divisible: list = field(default_factory=list)
    config: str = ""  # the config in words, for messages ("BLOCK_M=128, BLOCK_N=64, 8 warps, 3 stages")
    notes: list = field(default_factory=list)


@dataclass
class BuildResult:
    module: str
    kernel: str
    target: str
    label: str
    num_warps: int
    num_stages: int
    config: str = ""
    ok: bool = False
    error: str = ""  # the compiler's message, first lines
    where: str = ""  # file:line of the kernel source the message points at
    source_line: str = ""
    shared_bytes: int | None = None
    shared_limit: int | None = None
    dots: int = 0  # tt.dot ops in the Triton IR
    tensor_cores: str = ""  # the tensor-core instruction found in the PTX, "" if none
    async_copies: bool = False  # cp.async in the PTX: the K loop's tiles are copied ahead (pipelined)
    int32_offsets: list = field(default_factory=list)  # file:line of 32-bit pointer offsets (.offsets)
    load_bits: list = field(default_factory=list)  # bits per thread of each ld.global in the PTX (.loads)
    registers: int | None = None
    threads: int | None = None  # threads per block the PTX requires (.reqntid), what a launch must give
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
    return shorten(message), " -> ".join(places), " -> ".join(lines)


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
                         spec.config, shared_limit=SHARED_MEMORY_PER_BLOCK[spec.target], notes=list(spec.notes))
    started = time.perf_counter()
    try:
        fn = jit_function(spec.module, spec.kernel)
    except Exception as exc:  # noqa: BLE001  (a missing or broken kernel is reported, not raised)
        result.error = shorten(f"{type(exc).__name__}: {exc}")
        return result
    attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in spec.divisible}
    source = ASTSource(fn=fn, signature=dict(spec.signature), constexprs=dict(spec.constexprs), attrs=attrs)
    target = GPUTarget("cuda", TARGETS[spec.target], 32)
    try:
        compiled = triton.compile(source, target=target,
                                  options={"num_warps": spec.num_warps, "num_stages": spec.num_stages})
    except Exception as exc:  # noqa: BLE001
        from triton.compiler.errors import CompilationError

        if isinstance(exc, CompilationError):
            message, result.where, result.source_line = _compile_error(exc, fn)
        else:
            message = f"{type(exc).__name__}: {shorten(str(exc))}"
        result.error = explain(message)
        result.seconds = time.perf_counter() - started
        return result
    result.ok = True
    result.shared_bytes = int(compiled.metadata.shared)
    result.dots = len(re.findall(r"\btt\.dot(?:_scaled)?\b", compiled.asm.get("ttir", "")))
    ptx = compiled.asm.get("ptx", "")
    result.tensor_cores = next((name for op, name in TENSOR_CORE_OPS if op in ptx), "")
    result.async_copies = "cp.async" in ptx
    result.int32_offsets = int32_offsets(compiled.asm.get("ttir", ""))
    result.load_bits = global_load_bits(ptx)
    threads = re.search(r"\.reqntid\s+(\d+)", ptx)
    result.threads = int(threads.group(1)) if threads else 32 * int(compiled.metadata.num_warps)
    result.registers, result.spill_bytes = _resource_usage(compiled.asm["cubin"], spec.kernel)
    result.seconds = time.perf_counter() - started
    return result


def builds_for(launch: dict, target: str, label: str = "", all_configs: bool = True) -> list[Build]:
    """The builds of one recorded launch for `target`: one per autotune config (or only the first),
    else one at the launch's own options (Triton's defaults where it gave none). Specialised as the
    launch was (kernels.launches.specialization); a launch recorded without it is built as it stands,
    with a note."""
    if "args" not in launch:
        raise ValueError(f"{launch['name']}: its launch could not be described ({launch.get('error')})")
    signature, constexprs, divisible, named = {}, {}, [], {}
    for arg in launch["args"]:
        if "constexpr" in arg:
            signature[arg["name"]] = "constexpr"
            constexprs[arg["name"]] = arg["constexpr"]
            if "type" not in arg:  # a tl.constexpr parameter, not an argument specialised to 1
                named[arg["name"]] = arg["constexpr"]
        else:
            if arg.get("type") is None:
                raise ValueError(f"{launch['name']}: argument {arg['name']} has no Triton type ({arg.get('error')})")
            signature[arg["name"]] = arg["type"]
            if arg.get("divisibility") == 16:
                divisible.append(arg["name"])
    notes = [f"built unspecialised: {launch['specialization_error']}"] if "specialization_error" in launch else []
    configs = launch.get("configs") or [{"kwargs": {}, **DEFAULT_OPTIONS, **launch.get("options", {})}]
    if not all_configs:
        configs = configs[:1]
    found = []
    for config in configs:
        options = {**DEFAULT_OPTIONS, **{k: config[k] for k in DEFAULT_OPTIONS if k in config}}
        kwargs = config.get("kwargs", {})
        found.append(Build(launch["module"], launch["name"], target, signature, {**constexprs, **kwargs},
                           options["num_warps"], options["num_stages"], label, divisible,
                           config_name(kwargs or named, options["num_warps"], options["num_stages"]), notes))
    return found


def config_name(constexprs: dict, num_warps: int, num_stages: int) -> str:
    """A config in words for messages: its integer constexprs (the tile sizes), warps and stages."""
    tiles = [f"{k}={v}" for k, v in constexprs.items() if isinstance(v, int) and not isinstance(v, bool)]
    return ", ".join([*tiles, f"{num_warps} warps", f"{num_stages} stages"])


def run_builds(builds: list[Build], jobs: int, progress: bool = False) -> list[BuildResult]:
    """Build each, `jobs` at a time; with `progress`, a line per build on stderr as it finishes."""
    from concurrent.futures import ProcessPoolExecutor

    def report(results):
        for i, r in enumerate(results, 1):
            if progress:
                print(f"[{i}/{len(builds)}] {r.kernel} {r.target} {r.label} {r.num_warps}w{r.num_stages}s: "
                      f"{verdict(r)} ({r.seconds:.1f} s)", file=sys.stderr, flush=True)
            yield r

    if jobs <= 1:
        return list(report(build(b) for b in builds))
    with ProcessPoolExecutor(jobs) as pool:
        return list(report(pool.map(build, builds)))


