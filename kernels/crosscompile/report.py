"""Reporting: judging a build report (what stops a kernel from running on a GPU) and the tables of
`make gpu-compile`.

The judgement functions are pure functions of plain data, so that the grader can judge a build
reported by an untrusted process against its own limits.
"""

from __future__ import annotations

def unrun_kernel_problems(answer, what: str, launched: list[str]) -> list[str]:
    """What the build stands for: the kernels in a build report (plain data) must be among the kernels `what`
    launched for its value check just before (`launched`, their names, on the grader's own device). Only their
    configuration (tiles, warps, stages, grid) may differ on a GPU: a build of a kernel that no value test ran
    proves nothing about the kernel that computed the answers."""
    if not (isinstance(answer, dict) and isinstance(answer.get("launches"), list)):
        return []  # no launches to compare: report_problems says why
    names = {launch.get("name") for launch in answer["launches"] if isinstance(launch, dict)}
    extra = sorted(str(name) for name in names - set(launched))
    if not extra:
        return []
    return [f"{what} launches {', '.join(extra)} as on a GPU, which it did not launch for the value check (it "
            f"launched {', '.join(sorted(set(launched))) or 'no kernel'}): the build check builds the kernels the "
            "value tests run; on a GPU only their tiles, warps, stages and grid may differ"]


def report_problems(answer, where: str, target: str, shared_limit: int, tensor_cores: str | None = None,
                    int64_offsets: str | None = None) -> list[str]:
    """What stops the kernels in a worker's build report (plain data: {"launches", "builds"} or {"error"})
    from running on `target`, each problem prefixed by `where`. tensor_cores: the message to add when no
    build has a tl.dot on the tensor cores (None: no dot is required). int64_offsets: the message to add
    to a build with 32-bit pointer offsets from a program id (None: not required)."""
    if not isinstance(answer, dict):
        return [f"{where}: the build report is not a dict"]
    if "error" in answer:
        return [f"{where}: {answer['error']}"]
    launches, builds = answer.get("launches"), answer.get("builds")
    if not isinstance(launches, list) or not isinstance(builds, list):
        return [f"{where}: the build report has no launches or builds"]
    if not launches:
        return [f"{where}: launched no Triton kernel. The build check runs your code as on a GPU: "
                "torch.cuda.is_available() is True there (at import time too), get_device_capability() is the "
                "GPU's, tensors are on \"cuda\" and kernels.device.interpreted() is False: the path your code "
                "took here is the one it takes on a GPU"]
    built = {b.get("kernel") for b in builds if isinstance(b, dict)}
    missing = sorted({launch.get("name") for launch in launches if isinstance(launch, dict)} - built)
    found = [f"{where}: kernel {name} was launched but not built" for name in missing]
    for b in builds:
        if not isinstance(b, dict) or b.get("target") != target:
            found.append(f"{where}: a build for another target was reported")
            continue
        found += [f"{b.get('kernel')} ({where}): {problem}" for problem in build_problems(b, shared_limit)]
        if int64_offsets and b.get("int32_offsets"):
            found.append(f"{b.get('kernel')} ({where}): 32-bit offsets at {', '.join(map(str, b['int32_offsets']))}: "
                         f"{int64_offsets}")
    if tensor_cores and not any(isinstance(b, dict) and b.get("dots") and b.get("tensor_cores") for b in builds):
        found.append(f"{where}: {tensor_cores}")
    return found


def _read_builds(answer, where: str, target: str, unread: str) -> list[tuple[dict | None, str, str]]:
    """The builds of a worker's build report (plain data, as report_problems reads it), in order, as (build, " at
    CONFIG", problem): a build that compiled for `target` has no problem and is read by the caller; a report that is
    not one, a build for another target and a build that did not compile ("..., so `unread`") are problems, each
    prefixed by `where`."""
    if not isinstance(answer, dict) or not isinstance(answer.get("builds"), list) or not answer["builds"]:
        error = answer.get("error") if isinstance(answer, dict) else None
        return [(None, "", f"{where}: {error or 'the build report has no builds'}")]
    read = []
    for b in answer["builds"]:
        if not isinstance(b, dict) or b.get("target") != target:
            read.append((None, "", f"{where}: a build for another target was reported"))
            continue
        at = f" at {b['config']}" if b.get("config") else ""
        read.append((b, at, "" if b.get("ok") else f"{b.get('kernel')} ({where}): does not compile{at}, so {unread}"))
    return read


def narrow_load_problems(answer, where: str, target: str, hint: str) -> list[str]:
    """Each build in a worker's build report (plain data, as report_problems reads it) whose PTX has a global
    load of fewer than 128 bits per thread (kernels.crosscompile.loads), or no global load at all, with `hint`
    (what to do); a report that is not one, or a build that did not compile, is a problem too, each prefixed
    by `where`."""
    from kernels.crosscompile.loads import VECTOR_BITS

    found = []
    for b, at, problem in _read_builds(answer, where, target, "it has no loads to read"):
        if problem:
            found.append(problem)
            continue
        loads = b.get("load_bits")
        if not isinstance(loads, list) or not all(type(n) is int for n in loads):
            found.append(f"{b.get('kernel')} ({where}): no load widths reported")
        elif not loads:
            found.append(f"{b.get('kernel')} ({where}): no global load in its PTX{at}")
        elif min(loads) < VECTOR_BITS:
            widths = ", ".join(f"{loads.count(n)} load{'s' * (loads.count(n) > 1)} of {n} bits"
                               for n in sorted(set(loads)))
            found.append(f"{b.get('kernel')} ({where}): its global loads{at}: {widths} per thread; each should "
                         f"be {VECTOR_BITS} bits (ld.global.v4.b32, 16 bytes). {hint}")
    return found


def pipeline_problems(answer, where: str, target: str, hint_cores: str, hint_stages: str) -> list[str]:
    """What keeps the builds with a tl.dot in a worker's build report (plain data, as report_problems reads it)
    from the target's own tensor cores and from a software pipeline: each such build's PTX must use the
    target's tensor-core instruction (kernels.hardware.TENSOR_CORE_INSTRUCTION: wgmma on sm_90) and copy its
    tiles into shared memory ahead of use (cp.async, which Triton emits for num_stages >= 2), with the hints
    (what to do). A report that is not one, a build that did not compile, or no build with a tl.dot is a
    problem too, each prefixed by `where`."""
    from kernels.hardware import TENSOR_CORE_INSTRUCTION

    own = TENSOR_CORE_INSTRUCTION[target]
    found, dotted = [], 0
    for b, at, problem in _read_builds(answer, where, target, "its instructions cannot be read"):
        if problem:
            found.append(problem)
            continue
        if not b.get("dots"):
            continue
        dotted += 1
        cores = b.get("tensor_cores")
        if cores != own:
            found.append(f"{b.get('kernel')} ({where}): its tl.dot compiles to {cores or 'no tensor-core instruction'}"
                         f"{at}, not {own}, {target}'s own tensor-core instruction. {hint_cores}")
        if b.get("async_copies") is not True:
            found.append(f"{b.get('kernel')} ({where}): no cp.async in its PTX{at}: its tiles are loaded by the "
                         f"threads that then wait for them, with no copy in flight ahead of the tl.dot. {hint_stages}")
    if not dotted and not found:
        found.append(f"{where}: no build has a tl.dot")
    return found


def build_problems(result: dict, shared_limit: int) -> list[str]:
    """What is wrong with one build (a BuildResult as plain data) for a GPU whose blocks may use
    `shared_limit` bytes of shared memory; empty when nothing is. A pure function of the data, so that
    the grader can judge a build reported by an untrusted process against its own limit."""
    target = result.get("target", "the GPU")
    at = f" at {result['config']}" if result.get("config") else ""
    found = launch_limit_problems(result, f"{target}{at}")  # first: a failed build may fail for that reason
    if not result.get("ok"):
        where = result.get("where") or ""
        line = result.get("source_line") or ""
        source = f" (at {where}: {line})" if where else ""
        return found + [f"does not compile for {target}{at}: {result.get('error') or 'no message'}{source}"]
    shared = result.get("shared_bytes")
    if not isinstance(shared, int) or shared > shared_limit:
        found.append(f"shared memory {shared / 1024:.0f} KiB > {shared_limit // 1024} KiB on {target}{at}: smaller "
                     "tiles or fewer stages" if isinstance(shared, int) else "no shared-memory size reported")
    if result.get("dots") and not result.get("tensor_cores"):
        found.append(f"{result['dots']} tl.dot without tensor-core instructions on {target}: give tl.dot "
                     "bf16/fp16 operands (not fp32 with input_precision=\"ieee\") so it uses the tensor cores")
    return found


def launch_limit_problems(result: dict, where: str) -> list[str]:
    """A build that compiles but cannot launch on any NVIDIA GPU: over 1024 threads per block, or over
    64K registers per block (registers per thread x threads). Triton finds out only at launch."""
    from kernels.hardware import MAX_THREADS_PER_BLOCK, REGISTERS_PER_BLOCK

    warps = result.get("num_warps")
    threads = result.get("threads") if isinstance(result.get("threads"), int) else 32 * (warps or 0)
    found = []
    if threads > MAX_THREADS_PER_BLOCK:
        found.append(f"{threads} threads per block ({warps} warps of 32) > {MAX_THREADS_PER_BLOCK} on {where}: it "
                     f"cannot launch on any NVIDIA GPU; use num_warps <= {MAX_THREADS_PER_BLOCK // 32}")
    registers = result.get("registers")
    if isinstance(registers, int) and registers * threads > REGISTERS_PER_BLOCK:
        found.append(f"{registers} registers x {threads} threads = {registers * threads} > {REGISTERS_PER_BLOCK} "
                     f"registers per block on {where}: it cannot launch; fewer warps or smaller tiles")
    return found


def shorten(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= 400 else message[:397] + "..."


def verdict(r) -> str:
    return "FAILED" if not r.ok else ("; ".join(r.problems()) or "ok")


def print_table(results: list, every_build: bool) -> None:
    """One row per kernel and target (builds, worst shared memory, registers, seconds), or per build."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    if every_build:
        table = Table(title="Triton kernels built for GPUs (no GPU needed): every build")
        for column in ("kernel", "case", "target", "warps", "stages", "result", "shared KiB", "limit",
                       "tensor cores", "cp.async", "load bits", "regs", "stack B", "s"):
            table.add_column(column, justify="left" if column in ("kernel", "case", "result") else "right")
        for r in results:
            table.add_row(r.kernel, r.label, r.target, str(r.num_warps), str(r.num_stages), verdict(r),
                          "" if r.shared_bytes is None else f"{r.shared_bytes / 1024:.1f}", str(r.shared_limit // 1024),
                          r.tensor_cores or ("-" if not r.dots else "NONE"), "yes" if r.async_copies else "no",
                          load_widths(r.load_bits),
                          _num(r.registers), _num(r.spill_bytes),
                          f"{r.seconds:.1f}")
        console.print(table)
    groups: dict[tuple, list] = {}
    for r in results:
        groups.setdefault((r.kernel, r.target), []).append(r)
    table = Table(title="Triton kernels built for GPUs (no GPU needed): per kernel and target, over dtypes, "
                        "head dims and configs")
    for column in ("kernel", "target", "builds", "ok", "max shared KiB by stages", "limit", "tensor cores",
                   "cp.async", "max regs", "max stack B", "max s"):
        table.add_column(column, justify="left" if column == "kernel" else "right")
    for (kernel, target), rs in groups.items():
        built = [r for r in rs if r.ok]
        cores = sorted({r.tensor_cores for r in built if r.dots}) or (["NONE"] if any(r.dots for r in rs) else ["-"])
        table.add_row(kernel, target, str(len(rs)), str(sum(not r.problems() for r in rs)),
                      shared_by_stages(built), str(rs[0].shared_limit // 1024),
                      ",".join(c or "NONE" for c in cores), async_copies([r for r in built if r.dots]),
                      _num(max((r.registers or 0 for r in built), default=None)),
                      _num(max((r.spill_bytes or 0 for r in built), default=None)),
                      f"{max(r.seconds for r in rs):.1f}")
    console.print(table)
    for r in results:
        if r.problems():
            print(f"{r.kernel} ({r.label}, {r.target}, {r.num_warps} warps, {r.num_stages} stages): "
                  + "; ".join(r.problems()))


def async_copies(dotted: list) -> str:
    """Whether the builds with a tl.dot copy their tiles by cp.async (pipelined): "yes" for all, "no" for none,
    "some" (a kernel pipelined at some configs only), "-" where no build has a dot."""
    if not dotted:
        return "-"
    copied = sum(bool(r.async_copies) for r in dotted)
    return "yes" if copied == len(dotted) else "no" if not copied else "some"


def shared_by_stages(results: list) -> str:
    """The most shared memory (KiB) the builds take at each num_stages: "1: 32, 3: 64, 4: 96". Pipelined
    builds grow with the stages (a buffer per stage); one that does not grow is not pipelined."""
    most: dict[int, int] = {}
    for r in results:
        most[r.num_stages] = max(most.get(r.num_stages, 0), r.shared_bytes or 0)
    return ", ".join(f"{stages}: {most[stages] / 1024:.0f}" for stages in sorted(most))


def load_widths(bits: list) -> str:
    """The widths of a build's global loads, narrowest first: "16" for a strided GeLU, "128" for a vectorised one."""
    return ",".join(map(str, sorted(set(bits)))) or "-"


def _num(value, scale: int = 1) -> str:
    return "" if value is None else (f"{value / scale:.1f}" if scale != 1 else str(value))


