"""The GPU run in one command: everything that needs a GPU, checked in under 8 minutes, into one Markdown file.

    python scripts/gpu_validate.py --out build/gpu_validate.md      (make gpu-validate)
    python scripts/gpu_validate.py --steps grade-gpu_kernels,grade-flash_attention
    python scripts/gpu_validate.py --check-sandbox                  (which sandbox the gradings would use)

It installs nothing and needs no package index: a Python with torch, Triton and the packages of REQUIRED
(a GPU image's own, `make gpu-validate PYTHON=python3`), and for the gradings a sandbox: bubblewrap where it is
installed; else Debian's bubblewrap .deb carried in build/sandbox-tools/ (`make sandbox-debs` fetches it on a
machine with the package index), unpacked there and put first on PATH; else, as root, the grader's own
fallback, the worker as an unprivileged user of its own. Which one ran is in the report. Where a package or
every sandbox is missing it refuses at once (exit 3), saying in one line what is missing and how to get it.

Steps, each a subprocess with its own time limit inside an overall budget (a step that would not fit
is reported as skipped, never silently dropped; each step's whole output is kept beside the report, in
build/gpu_validate/STEP.log, and the report is written again after each step). They run in order of
importance (STEPS: gpu_kernels and flash_attention graded by the grader, which no GPU has seen finish yet,
then the reference's tests, gpu_kernels', the build agreement, the kernel timings, the stubs, the attention
bench); by topic:
 1. the GPU, torch, Triton and CUDA versions;
 2. the public and hidden flash_attention tests on the reference (float32 on the GPU, the bf16/fp16
    and speed tests marked gpu), the same for gpu_kernels (GeLU, softmax and matmul: half precision,
    bandwidth against torch, the matmul against cuBLAS, the fused epilogue), then the public ones of
    both on the stubs (assignments/), whose Triton tests must fail, not crash;
 3. the reference graded end to end by the grader as a submission, gpu_kernels then flash_attention:
    sandboxed worker with the GPU's device files bound, Triton's cache in its scratch folder, no network,
    and the design checks that count under the interpreter in a second worker without the GPU;
 4. `make bench` (kernels.bench_attention) with every row, the speed tests' ratios and the
    leaderboard row (CS336's configuration: batch 1, 16 heads, d 64, seq 16384, bf16, causal,
    forward+backward); and `make bench-kernels` (kernels.bench_kernels)
    on the reference, which writes the staff-measured table, build/gpu_validate/bench_kernels/
    bench_kernels.csv (and its plot), for students without a GPU: GB/s of GeLU and softmax, TFLOP/s
    of the matmul at three sizes against the roofline, and the wave sweep at m = 896;
 5. each GPU threshold of the suites beside the value measured, and the GPU build of kernels
    .crosscompile beside what ran: for each kernel and config, the cross-compiled shared memory,
    registers and spilled bytes beside the same kernel's `kernel.metadata.shared`, `n_regs` and `n_spills`
    after a real launch (`--agreement`), so the first GPU run tells whether the CPU checks can be trusted;
    a difference fails the step (exit 1).

Without CUDA it refuses (exit 2) and says what runs on a CPU instead.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The steps' share of under 8 minutes in all: the checks before them (imports, the sandbox's probe) take
# seconds, and a step is never started past the budget (run_step).
BUDGET_S = 440.0
NO_GPU = ("gpu-validate needs a CUDA GPU (torch.cuda.is_available() is False here). On a CPU, "
          "`make gpu-compile` builds every kernel for sm_80, sm_90 and sm_100, `make rehearse-gpu` grades with "
          "the grader's GPU branches taken, and `make test` runs the rest.")
# What the steps import (pyproject.toml's dependencies): checked before anything runs.
REQUIRED = ("torch", "triton", "numpy", "einops", "pytest", "hypothesis", "rich", "matplotlib", "safetensors")
# `make sandbox-debs`: Debian's bubblewrap .deb and the seccomp binding's wheel, for a machine without apt or pip's index
CARRIED = ROOT / "build" / "sandbox-tools"
GET_BUBBLEWRAP = ("run `make sandbox-debs` where Debian's package index is (apt-get download bubblewrap into "
                  "build/sandbox-tools/) and bring that folder along")


class Missing(RuntimeError):
    """Something the run needs is not here: the message says what, and how to get it, in one line."""


def missing_packages() -> list[str]:
    import importlib.util

    return [name for name in REQUIRED if importlib.util.find_spec(name) is None]


def unpack_deb(deb: Path, dest: Path) -> Path:
    """The files of a Debian package unpacked into `dest` (its data.tar, read by Python: an ar archive of
    tarballs, xz or gzip in Debian's), without dpkg or root; `dest` is returned."""
    import io
    import tarfile

    data = deb.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise Missing(f"{deb} is not a Debian package (no ar header): fetch it again; {GET_BUBBLEWRAP}")
    at = 8
    while at + 60 <= len(data):
        name, size = data[at:at + 16].decode().strip().rstrip("/"), int(data[at + 48:at + 58])
        if name.startswith("data.tar"):
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python 3.11.4 and later
            try:
                with tarfile.open(fileobj=io.BytesIO(data[at + 60:at + 60 + size])) as tar:
                    tar.extractall(dest, **safe)
            except tarfile.TarError as exc:
                raise Missing(f"{deb}: its {name} cannot be read here ({exc}): unpack it with `dpkg-deb -x`, or "
                              f"{GET_BUBBLEWRAP}") from None
            return dest
        at += 60 + size + size % 2
    raise Missing(f"{deb} holds no data.tar: fetch it again; {GET_BUBBLEWRAP}")


def carried_wheels(carried: Path = CARRIED) -> list[str]:
    """The pure-Python wheels in `carried` of packages this Python lacks (pyseccomp: the user mode's seccomp
    filter), put on this process's import path and on the steps' PYTHONPATH; returns their names."""
    import importlib.util

    added = []
    for wheel in sorted(carried.glob("pyseccomp-*.whl"))[-1:]:
        if importlib.util.find_spec("pyseccomp") is None:
            sys.path.insert(0, str(wheel))
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(wheel), os.environ.get("PYTHONPATH")) if p)
            added.append(wheel.name)
    return added


def sandbox(carried: Path = CARRIED) -> str:
    """The sandbox the grading steps will have, in one line. Where no bubblewrap runs, Debian's .deb from
    `carried` is unpacked there and its folder put first on PATH (this process's: the steps inherit it, and
    the grader runs the bubblewrap it finds, by its path). Raises Missing where there is none, and the
    grader, not being root, has no fallback either."""
    from autograder.sandbox import policy

    usable, note = policy.bwrap_status()
    if usable:
        return f"bubblewrap ({shutil.which('bwrap')})"
    for deb in sorted(carried.glob("bubblewrap_*.deb"))[-1:]:
        bin_dir = unpack_deb(deb, carried / "unpacked") / "usr" / "bin"
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        policy.bwrap_status.cache_clear()
        usable, note = policy.bwrap_status()
        if usable:
            return f"bubblewrap, unpacked from {deb.relative_to(ROOT) if deb.is_relative_to(ROOT) else deb}"
        note = f"{note} (the one unpacked from {deb.name})"
    carried_wheels(carried)
    try:
        protections = policy.detect("auto")
    except policy.SandboxUnavailable as exc:
        as_user, why = policy.user_status()
        raise Missing(f"gpu-validate: no sandbox for the gradings: no bubblewrap runs ({note}): {GET_BUBBLEWRAP}; "
                      f"and the grader's fallback, its user mode, cannot run either ({exc if as_user else why})") from None
    return f"the grader's user mode, since no bubblewrap runs ({note}): {protections.lines()[0]}"


@dataclass
class Step:
    """One step's command and what came of it."""

    name: str
    command: list[str]
    limit_s: float
    returncode: int | None = None  # None: not run (skipped for time)
    seconds: float = 0.0
    output: str = ""
    tests: dict = field(default_factory=dict)  # test id -> (outcome, message), from a junit file
    note: str = ""


def junit_outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """{classname::name: (passed/failed/error/skipped, first line of the message)} of a junit XML file."""
    if not path.exists():
        return {}
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        bad = [child for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[bad[0].tag] if bad else "passed"
        message = (bad[0].get("message") or "").splitlines()[0][:300] if bad else ""
        found[f"{case.get('classname')}::{case.get('name')}"] = (outcome, message)
    return found


def run_step(step: Step, deadline: float, junit: Path | None = None) -> Step:
    left = deadline - time.monotonic()
    if left < min(step.limit_s, 30):
        step.note = f"skipped: only {left:.0f} s of the budget left"
        return step
    started = time.monotonic()
    try:
        done = subprocess.run(step.command, cwd=ROOT, capture_output=True, text=True, timeout=min(step.limit_s, left))
        step.returncode, step.output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        step.returncode = 124
        partial = exc.stdout or ""
        step.output = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
        step.note = f"timed out after {min(step.limit_s, left):.0f} s"
    step.seconds = time.monotonic() - started
    if junit is not None:
        step.tests = junit_outcomes(junit)
    return step


def pytest_step(name: str, paths: list[str], impl: str, junit: Path, limit_s: float) -> Step:
    return Step(name, [sys.executable, "-m", "pytest", *paths, "--impl", impl, "-q", "-p", "no:cacheprovider",
                       f"--junitxml={junit}"], limit_s)


def grade_step(assignment: str, work: Path, limit_s: float) -> Step:
    """The reference graded end to end as a submission, by the grader on this GPU (its sandboxed worker with
    the device files bound; the design checks in a second worker under the interpreter)."""
    return Step(f"grade-{assignment}", [sys.executable, "-m", "autograder", "grade", "solutions", "--assignment",
                                        assignment, "--out", str(work / f"grade_{assignment}")], limit_s)


def points_line(output: str) -> str:
    """The points table's lines of a pytest or grader run ("flash_attention  61 / 61 points ...")."""
    return "; ".join(" ".join(line.split()) for line in output.splitlines()
                     if re.search(r"\d+(\.\d+)? / \d+(\.\d+)?\s+(public )?points", line))


def thresholds(steps: dict[str, Step]) -> list[tuple[str, str, str]]:
    """(what, measured, threshold) for each GPU threshold: the bench's ratio lines and each gpu test."""
    rows = []
    bench = steps.get("bench")
    if bench is not None:
        for line in bench.output.splitlines():
            match = re.match(r"\s+(.+?): (.+?)\s+\[(.+)\]$", line)
            if match:
                rows.append(match.groups())
    for step in (steps.get("reference"),):
        for test, (outcome, message) in (step.tests if step else {}).items():
            if "on_gpu" in test:
                rows.append((test.split("::")[-1], outcome, message or "as its docstring states"))
    return rows


def render(steps: list[Step], environment: str) -> str:
    """The Markdown report."""
    out = ["# GPU validation", "", "```", environment.strip(), "```", "",
           "| step | exit | seconds | result |", "|---|---|---|---|"]
    for s in steps:
        result = s.note or points_line(s.output) or ("ok" if s.returncode == 0 else "see below")
        out.append(f"| {s.name} | {'-' if s.returncode is None else s.returncode} | {s.seconds:.0f} | {result} |")
    rows = thresholds({s.name: s for s in steps})
    if rows:
        out += ["", "## GPU thresholds beside the values measured", "", "| what | measured | threshold |",
                "|---|---|---|"]
        out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    for s in steps:
        failed = {t: m for t, m in s.tests.items() if m[0] in ("failed", "error")}
        if failed:
            out += ["", f"## {s.name}: tests not passed", ""]
            out += [f"- `{t}`: {outcome}: {message}" for t, (outcome, message) in sorted(failed.items())]
    for s in steps:
        if s.name in ("bench", "crosscompile", "agreement") or s.returncode not in (0, None):
            out += ["", f"## {s.name}: output (last lines)", "", "```", *s.output.strip().splitlines()[-60:], "```"]
    return "\n".join(out) + "\n"


def environment() -> str:
    import torch

    lines = [f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}"]
    try:
        import triton

        lines.append(f"triton {triton.__version__}")
    except ImportError:
        lines.append("triton: not installed")
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        lines.append(f"GPU {i}: {p.name}, sm_{p.major}{p.minor}, {p.total_memory / 2**30:.0f} GiB")
    return "\n".join(lines)


def agreement(crosscompiled: Path) -> list[str]:
    """Markdown rows: each kernel the quick cross-compile built (its JSON) beside the same kernel compiled
    and launched here (bf16, d 64: the quick matrix's calls, on real CUDA tensors). Needs a GPU."""
    import json

    import torch

    from kernels.crosscompile import jit_function
    from kernels.crosscompile.project import demos_call, flash_attention_call, gpu_kernels_call

    def make(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, dtype=dtype, device="cuda")

    for call in (flash_attention_call("solutions", "bf16", 64, True), demos_call("bf16"),
                 flash_attention_call("solutions", "bf16", 64, False), gpu_kernels_call("solutions", "bf16")):
        call(make)
    torch.cuda.synchronize()
    launched = {b["kernel"]: [k for cache in getattr(jit_function(b["module"], b["kernel"]), "device_caches",
                                                     {}).values() for k in cache[0].values()]
                for b in json.loads(crosscompiled.read_text())}
    return agreement_rows(json.loads(crosscompiled.read_text()), launched)


def agreement_rows(builds: list[dict], launched: dict[str, list]) -> list[str]:
    """Markdown rows: each cross-compiled build beside the kernel of the same name, warps and stages that a
    real launch compiled (`kernel.metadata.shared`, `n_regs`, `n_spills`; of several, such as the causal and
    the full forward, the one most like it), and whether they agree: the shared memory within 1 KiB (the CPU check's verdict on fitting holds), the same registers per thread,
    and the same spilled bytes per thread. Triton's `n_spills` is the launched kernel's local memory per
    thread in bytes divided by 4 (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES / 4, rounded down), the cross-compile's
    `spill_bytes` the stack frame in bytes (cuobjdump's STACK): both are shown in bytes, the GPU's as
    n_spills x 4, and agree within 4 bytes. "NO" names what differs; "not launched" where no kernel was."""
    rows = ["| kernel | warps | stages | shared KiB (CPU / GPU) | registers per thread (CPU / GPU) | "
            "spilled bytes per thread (CPU stack / GPU n_spills x 4) | agree |",
            "|---|---|---|---|---|---|---|"]
    for b in builds:
        same = [k for k in launched.get(b["kernel"], [])
                if (k.metadata.num_warps, k.metadata.num_stages) == (b["num_warps"], b["num_stages"])]
        if not same:
            rows.append(f"| {b['kernel']} | {b['num_warps']} | {b['num_stages']} | "
                        f"{b['shared_bytes'] / 1024:.1f} / not launched | {b['registers']} / - | "
                        f"{b['spill_bytes']} / - | - |")
        else:  # the launched kernel most like the build: a kernel of one name and config is launched once per
            # specialisation (causal and not, other constexprs), and the build is one of them
            kernel, differ = min(((k, _differences(b, k)) for k in same), key=lambda pair: len(pair[1]))
            gpu_shared, gpu_regs, gpu_spill_bytes = _gpu_figures(kernel)
            rows.append(f"| {b['kernel']} | {b['num_warps']} | {b['num_stages']} | "
                        f"{b['shared_bytes'] / 1024:.1f} / {gpu_shared / 1024:.1f} | "
                        f"{b['registers']} / {'?' if gpu_regs is None else gpu_regs} | "
                        f"{b['spill_bytes']} / {'?' if gpu_spill_bytes is None else gpu_spill_bytes} | "
                        f"{'NO: ' + ', '.join(differ) if differ else 'yes'} |")
    return rows


def _gpu_figures(kernel) -> tuple[int, int | None, int | None]:
    """A launched kernel's shared bytes, registers per thread and spilled bytes per thread (n_spills x 4)."""
    spills = getattr(kernel, "n_spills", None)
    return kernel.metadata.shared, getattr(kernel, "n_regs", None), None if spills is None else 4 * spills


def _differences(build: dict, kernel) -> list[str]:
    """What differs between a cross-compiled build and a launched kernel: shared, registers, spills."""
    gpu_shared, gpu_regs, gpu_spill_bytes = _gpu_figures(kernel)
    return [what for what, agree in (
        ("shared", abs(gpu_shared - build["shared_bytes"]) <= 1024),
        ("registers", gpu_regs == build["registers"]),
        ("spills", gpu_spill_bytes is not None and build["spill_bytes"] is not None
         and 0 <= build["spill_bytes"] - gpu_spill_bytes < 4)) if not agree]


def disagrees(rows: list[str]) -> bool:
    """True when a row of agreement_rows says the cross-compile and the GPU differ: the agreement step then
    exits 1, so that `make gpu-validate` fails where the CPU checks cannot be trusted."""
    return any(row.rstrip(" |").rsplit("|", 1)[-1].strip().startswith("NO") for row in rows[2:])


def plan(work: Path) -> list[tuple[Step, Path | None]]:
    """Every step, in order of importance, with its junit file where it has one: what a step cannot finish in the
    budget left is reported as skipped. The limits are about 1.2x what each took on an H100 from a cold Triton
    cache (2026-12, Triton 3.6): 30 s to grade gpu_kernels (before the interpreting worker that now runs the
    design checks), 245 s for the reference's flash_attention tests (compiling, mostly), 45 s for
    gpu_kernels', 6 and 11 s for the build agreement, 11 s for the kernel timings, 5 s for the stubs, 67 s for
    the bench. flash_attention's grading has not finished on a GPU yet (over 100 s, when its worker autotuned
    about 180 kernel builds); its worker now launches each autotuned kernel at its first config, about 36
    builds (autograder.grading.compiles: some 40 s of compiling on a 2-core CPU), and it keeps 300 s until a GPU
    has timed it. The reference's own tests (pytest, outside the grader) still autotune. The gradings come
    first, since no GPU has proved them yet; the bench last, whose figures docs/gpus.md has."""
    flash = ["tests/flash_attention", "autograder/suites/flash_attention"]
    kernel_tests = ["tests/gpu_kernels", "autograder/suites/gpu_kernels"]
    return [
        (grade_step("gpu_kernels", work, 120), None),
        (grade_step("flash_attention", work, 300), None),
        (pytest_step("reference", flash, "solutions", work / "reference.xml", 300), work / "reference.xml"),
        (pytest_step("gpu_kernels", kernel_tests, "solutions", work / "gpu_kernels.xml", 90),
         work / "gpu_kernels.xml"),
        (Step("crosscompile", [sys.executable, "-m", "kernels.crosscompile", "--quick", "--json",
                               str(work / "crosscompile.json")], 30), None),
        (Step("agreement", [sys.executable, "scripts/gpu_validate.py", "--agreement", str(work / "crosscompile.json")],
              60), None),
        (Step("bench-kernels", [sys.executable, "-m", "kernels.bench_kernels", "--impl", "solutions", "--out",
                                str(work / "bench_kernels")], 60), None),
        (pytest_step("stubs", ["tests/flash_attention", "tests/gpu_kernels"], "assignments", work / "stubs.xml", 40),
         work / "stubs.xml"),
        (Step("bench", [sys.executable, "-m", "kernels.bench_attention", "--out", str(work / "bench.png")], 100), None),
    ]


def chosen(steps: list[tuple[Step, Path | None]], names: list[str] | None) -> list[tuple[Step, Path | None]]:
    """The steps named (all where None), in their order of importance whatever the order they were named in."""
    known = [step.name for step, _ in steps]
    unknown = sorted(set(names or ()) - set(known))
    if unknown:
        raise ValueError(f"no step {', '.join(unknown)}; the steps: {', '.join(known)}")
    return [(step, junit) for step, junit in steps if names is None or step.name in names]


def run_steps(steps: list[tuple[Step, Path | None]], out: Path, work: Path, deadline: float, header: str) -> list[Step]:
    """Each step in order, within the deadline; its whole output into work/STEP.log, and the report written
    again after each, so that a run cut short keeps what it found."""
    done = []
    for step, junit in steps:
        done.append(run_step(step, deadline, junit))
        (work / f"{step.name}.log").write_text(step.output)
        out.write_text(render(done, header))
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu_validate.md")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for all steps together")
    parser.add_argument("--steps", help="only these steps, comma-separated, in their usual order (default: all)")
    parser.add_argument("--check-sandbox", action="store_true",
                        help="say which sandbox the gradings would run in (or what is missing), and stop")
    parser.add_argument("--carried", type=Path, default=CARRIED,
                        help="where `make sandbox-debs` put Debian's bubblewrap .deb (default: build/sandbox-tools)")
    parser.add_argument("--agreement", type=Path, help="print a cross-compile JSON beside the kernels launched here")
    args = parser.parse_args(argv)
    if args.agreement:  # a step of the run below, in a process of its own
        if not cuda():
            return 2
        rows = agreement(args.agreement)
        print("\n".join(rows))
        return 1 if disagrees(rows) else 0
    work = args.out.parent / "gpu_validate"
    try:
        steps = chosen(plan(work), args.steps.split(",") if args.steps else None)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        if args.check_sandbox:  # standard library and the grader's policy only: any python3 can say it
            print(f"the gradings would run in: {sandbox(args.carried)}")
            return 0
        absent = missing_packages()
        if absent:
            raise Missing(f"gpu-validate: this Python ({sys.executable}) lacks {', '.join(absent)}: install them where a "
                          "package index is (make install), or give `make gpu-validate PYTHON=...` one that has them")
        grading = any(step.name.startswith("grade-") for step, _ in steps)
        where = sandbox(args.carried) if grading else "none needed (no grading step)"
    except Missing as exc:
        print(exc, file=sys.stderr)
        return 3
    if not cuda():
        return 2
    work.mkdir(parents=True, exist_ok=True)
    header = f"{environment()}\nsandbox of the gradings: {where}"
    done = run_steps(steps, args.out, work, time.monotonic() + args.budget, header)
    print(f"wrote {args.out}")
    return 0 if all(succeeded(s) for s in done) else 1


def cuda() -> bool:
    """Whether torch sees a CUDA GPU; where it does not, NO_GPU is said."""
    import torch

    if not torch.cuda.is_available():
        print(NO_GPU, file=sys.stderr)
    return torch.cuda.is_available()


def succeeded(step: Step) -> bool:
    """The stubs' tests must fail (exit 1), not crash (2 to 5: interrupted, internal or usage error)."""
    return step.returncode in ((0, 1) if step.name == "stubs" else (0,))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
