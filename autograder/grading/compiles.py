"""The kernel compilations a grading of the reference triggers on a GPU, counted on a CPU, and their seconds.

    python -m autograder.grading.compiles [--assignments A,B] [--sample N] [--json OUT]

On a GPU, Triton compiles a kernel at its first launch for each new (signature with its specialisation,
constexprs, num_warps, num_stages): its cache key. An autotuned kernel, at the first launch of each new
autotune key (the values of its key arguments and its tensors' dtypes), compiles every config and times
them; a later launch of the same key with another specialisation compiles the config chosen, once. The
grader's GPU worker launches each autotuned kernel at its first config instead (kernels.first_config):
grading asks whether a kernel is right, not which config is fastest; both counts are given. The worker
keeps one Triton cache per submission (its scratch folder), so every submission pays for its compilations,
inside the calls that launch them. Counted here in three steps, each in a process of its own:

1. the calls (`record`, under Triton's interpreter): an assignment's public tests and hidden suites run
   against the reference as the grader runs them, with a `student` that writes down each call and
   scenario it is asked for (tensors as shape, stride, storage offset and dtype) and answers it by running
   it here, on the CPU, so that each test goes on to its next call. The grader's side believes it has a GPU
   (torch.cuda.is_available() answers True outside the student's code), so the tests take their GPU
   path: the device "cuda", the tests marked `gpu` included (a test that needs CUDA itself stops there; its
   calls until then are counted). Scenarios that a GPU grader runs elsewhere are left out: those counted
   under the interpreter (`interpreted`, in the interpreting worker) and the compile checks' builds (a
   `cpu_budget`: cross-compiled in a process of their own, timed by the grader as its own work);
2. the launches (`replay`, where Triton compiles): each call run again as on a GPU, by the dry run of
   kernels.crosscompile (fake CUDA tensors of the same layouts, each launch recorded with Triton's
   specialisation and an autotuned kernel's configs), the student's modules imported anew inside it;
3. the compilations: the distinct cache keys of those launches, with the autotuner's rule above; and the
   seconds, a sample of each kernel's builds compiled here for the course GPU (kernels.crosscompile.build,
   a fresh Triton cache): the compile is CPU work, the same on the GPU machine's host up to its CPU's speed.
   Their mean per kernel, times the kernel's count, is the estimate.

A call whose replay fails part way (host code that reads a fake tensor's values, a profiler) keeps the
launches made until then, and is counted in `partial`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = ("resource_accounting", "gpu_kernels", "flash_attention")
TARGET = "sm_90"
SAMPLE = 3  # builds of each kernel compiled for the seconds
SEED = 1


# ---- 1. The calls, recorded under the interpreter --------------------------------------------------------


def describe(value: Any) -> Any:
    """A call's argument as plain JSON: a tensor by its layout and dtype (its values do not change what
    compiles), a dtype by its name, containers element by element."""
    import torch

    if isinstance(value, torch.Tensor):
        return {"__tensor__": {"shape": list(value.shape), "stride": list(value.stride()),
                               "offset": value.storage_offset(), "dtype": str(value.dtype),
                               "storage": value.untyped_storage().nbytes() // value.element_size()}}
    if isinstance(value, torch.dtype):
        return {"__dtype__": str(value)}
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): describe(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"__unknown__": type(value).__name__}


def rebuilt(value: Any) -> Any:
    """describe()'s inverse, a tensor as zeros of the same layout on the CPU (as the grader sends it)."""
    import torch

    if isinstance(value, dict) and "__tensor__" in value:
        t = value["__tensor__"]
        dtype = getattr(torch, t["dtype"].removeprefix("torch."))
        storage = torch.zeros(max(t["storage"], 1), dtype=dtype)
        return storage.as_strided(t["shape"], t["stride"], t["offset"])
    if isinstance(value, dict) and "__dtype__" in value:
        return getattr(torch, value["__dtype__"].removeprefix("torch."))
    if isinstance(value, dict) and "__unknown__" in value:
        raise TypeError(f"a recorded argument of type {value['__unknown__']} cannot be replayed")
    if isinstance(value, list):
        return [rebuilt(v) for v in value]
    if isinstance(value, dict):
        return {k: rebuilt(v) for k, v in value.items()}
    return value


def _on_the_gpu(kwargs: dict) -> dict:
    """A scenario's arguments for the dry run: the device "cuda" as "cuda:0", which a CPU build of torch can move
    fake tensors to (it cannot look up the current device of "cuda")."""
    return {k: ("cuda:0" if k == "device" and v == "cuda" else v) for k, v in kwargs.items()}


def _on_the_cpu(value: Any) -> Any:
    """A scenario's arguments for running it here: the device "cuda" is the CPU."""
    if isinstance(value, dict):
        return {k: ("cpu" if k == "device" and v == "cuda" else _on_the_cpu(v)) for k, v in value.items()}
    return value


def _recorder(real_is_available):
    """The `student` of the recording run: each call and scenario written down, then run here, on the CPU."""
    from autograder.harness.student import LocalStudent

    class Recorder(LocalStudent):
        calls: list[dict] = []
        on_gpu_only = False  # the current test is marked gpu: its calls are written down, not run here

        def call(self, target: str, *args: Any, **kwargs: Any) -> Any:
            self.calls.append({"op": "call", "target": target, "args": describe(args), "kwargs": describe(kwargs)})
            return self._answer(lambda: super(Recorder, self).call(target, *args, **kwargs))

        def run(self, scenario, **kwargs: Any) -> Any:
            from autograder.harness.student import scenario_name

            if getattr(scenario, "interpreted", False) or getattr(scenario, "cpu_budget", None):
                return _here(real_is_available, lambda: super(Recorder, self).run(scenario, **_on_the_cpu(kwargs)))
            self.calls.append({"op": "scenario", "target": scenario_name(scenario), "kwargs": describe(kwargs)})
            if self.on_gpu_only:  # half precision and speed at a GPU's sizes: far too slow interpreted
                raise NotOnACpu(f"{scenario_name(scenario)} needs a GPU: written down, not run")
            return self._answer(lambda: super(Recorder, self).run(scenario, **_on_the_cpu(kwargs)))

        def _answer(self, run):
            """run()'s answer here; a call that raises here (a test of invalid arguments) is marked so."""
            try:
                return _here(real_is_available, run)
            except Exception:
                self.calls[-1]["raised"] = True
                raise

    return Recorder()


class NotOnACpu(Exception):
    """A call of a test marked gpu, recorded and not run: the test stops there."""


def _here(real_is_available, run):
    """run() with torch.cuda.is_available() answering as this machine does: the student's code runs here."""
    import torch

    believed, torch.cuda.is_available = torch.cuda.is_available, real_is_available
    try:
        return run()
    finally:
        torch.cuda.is_available = believed


def record(assignment: str, out: Path) -> None:
    """The calls of the assignment's tests and suites against the reference, as a GPU grader makes them, into
    `out` (JSON): {"calls": [...], "tests": N}."""
    import kernels  # noqa: F401  (Triton interprets here, before torch.cuda is made to answer True)
    import pytest
    import torch

    from autograder.grading.runner import SOLUTIONS, test_paths
    from kernels import impl

    real = torch.cuda.is_available
    torch.cuda.is_available = lambda: True  # the grader's side: its tests take their GPU path
    recorder = _recorder(real)

    class Plugin:
        tests = 0

        @pytest.hookimpl
        def pytest_llmsys_student(self, config):
            return recorder

        def pytest_runtest_setup(self, item):
            recorder.on_gpu_only = item.get_closest_marker("gpu") is not None

        def pytest_runtest_logreport(self, report):
            self.tests += report.when == "call"

    plugin = Plugin()
    impl.activate(SOLUTIONS)
    with open(os.devnull, "w") as sink:
        stdout, stderr = os.dup(1), os.dup(2)
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            pytest.main(["-q", "-p", "no:cacheprovider", "--seed", str(SEED), f"--rootdir={ROOT}",
                         *test_paths(assignment)], plugins=[plugin])
        finally:
            os.dup2(stdout, 1)
            os.dup2(stderr, 2)
    out.write_text(json.dumps({"calls": recorder.calls, "tests": plugin.tests}))


# ---- 2. The launches, replayed as on a GPU -----------------------------------------------------------------


def replay(calls: list[dict], packages: list[str], target: str = TARGET) -> dict:
    """{"launches": [...], "autotune_keys": {kernel: [argument names]}, "partial": [...]} of the calls, each run
    as on a GPU of `target` (needs TRITON_INTERPRET=0), each in a child forked from this process: autograd on
    fake CUDA tensors aborts a CPU build of torch (kernels.crosscompile.dryrun), which costs only that call."""
    from kernels import impl
    from kernels.crosscompile.request import fork_answer

    impl.activate(ROOT / "solutions")
    _replay_one({"target": "kernels.device:default_device", "kwargs": {}}, [], target)  # what every call imports,
    # imported once here, before the children are forked (torch's fake tensors, Triton's launcher)
    launches, keys, partial = [], {}, []
    with tempfile.TemporaryDirectory(prefix="replay-") as folder:
        for index, call in enumerate(calls):
            answer = Path(folder) / f"{index}.json"
            pid = fork_answer(lambda: _replay_one(call, packages, target), answer)  # noqa: B023  (called at once)
            status = os.waitpid(pid, 0)[1]
            if not answer.exists():
                partial.append(f"{call['target']}: its replay ended without an answer (status {status}: autograd "
                               "on fake CUDA tensors aborts a CPU build of torch)")
                continue
            one = json.loads(answer.read_text())
            launches += one["launches"]
            keys.update(one["autotune_keys"])
            partial += one["partial"]
    return {"launches": launches, "autotune_keys": keys, "partial": partial}


def _replay_one(call: dict, packages: list[str], target: str) -> dict:
    from autograder.harness.student import resolve
    from kernels.crosscompile.dryrun import as_on_a_gpu, imported_anew
    from kernels.launches import record_launches

    keys, partial = {}, []
    with imported_anew(*packages), as_on_a_gpu(target), _cuda_in_a_cpu_torch(), \
            record_launches(dry_run=True) as recorded:
        try:  # the tensors made inside the dry run: fake ones, which move to the GPU as real ones would
            resolve(call["target"])(*rebuilt(call.get("args", [])), **_on_the_gpu(rebuilt(call["kwargs"])))
        except Exception as exc:  # noqa: BLE001  (the launches made until then still count)
            if not call.get("raised"):  # one that raised on the CPU too (invalid arguments) is whole
                partial.append(f"{call['target']}: {type(exc).__name__}: {str(exc)[:200]}")
        for launch in recorded.launches:
            kernel = _module_attribute(launch)
            if kernel is not None and hasattr(kernel, "keys") and hasattr(kernel, "configs"):
                keys[_kernel_key(launch)] = list(kernel.keys)
    return {"launches": recorded.launches, "autotune_keys": keys, "partial": partial}


@contextlib.contextmanager
def _cuda_in_a_cpu_torch() -> Iterator[None]:
    """What a CPU build of torch refuses fake CUDA tensors ("not linked with support for cuda devices"), given in
    the dry run: indexing (`x[1:]`, `x[..., ::2]`: the same view taken of a meta tensor of the same layout, then
    of the tensor by as_strided), a copy in dense order (`contiguous`, `clone`: a new tensor of that layout; the
    values do not matter) and a generator on "cuda" (one on the CPU)."""
    import torch

    originals = {name: getattr(torch.Tensor, name) for name in ("__getitem__", "contiguous", "clone")}
    generator = torch.Generator

    def refused(self, exc: RuntimeError) -> bool:
        return self.device.type == "cuda" and "not linked with support for cuda" in str(exc)

    def index(self, key):
        try:
            return originals["__getitem__"](self, key)
        except RuntimeError as exc:
            if not refused(self, exc):
                raise
            meta = torch.empty(self.untyped_storage().nbytes() // self.element_size(), dtype=self.dtype,
                               device="meta").as_strided(self.shape, self.stride(), self.storage_offset())
            view = originals["__getitem__"](meta, key)
            return self.as_strided(view.shape, view.stride(), view.storage_offset())

    def copied(name: str, layout):
        def copy(self, *args, **kwargs):
            try:
                return originals[name](self, *args, **kwargs)
            except RuntimeError as exc:
                if not refused(self, exc):
                    raise
                return layout(self)
        return copy

    torch.Tensor.__getitem__ = index
    torch.Tensor.contiguous = copied("contiguous", lambda t: torch.empty(t.shape, dtype=t.dtype, device=t.device))
    torch.Tensor.clone = copied("clone", lambda t: torch.empty_like(t))
    torch.Generator = lambda device="cpu": generator()
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
        torch.Generator = generator


def _module_attribute(launch: dict):
    module = sys.modules.get(launch.get("module", ""))
    return getattr(module, launch.get("name", ""), None) if module is not None else None


def _kernel_key(launch: dict) -> str:
    return f"{launch.get('module', '')}.{launch.get('name', '')}"


# ---- 3. The compilations and their seconds -----------------------------------------------------------------


def compilations(launches: list[dict], autotune_keys: dict[str, list[str]], target: str = TARGET,
                 one_config: bool = False) -> dict[str, list]:
    """{kernel: [its distinct Builds]}: what the launches compile on a GPU, with the autotuner's rule (every
    config at a new autotune key; the config chosen, once, for another specialisation of a key seen). With
    `one_config`, what they would compile if each autotuned kernel were launched at one config."""
    from kernels.crosscompile.compiler import builds_for

    found: dict[str, dict[tuple, Any]] = {}
    tuned: dict[str, set] = {}
    for launch in launches:
        if "args" not in launch:
            continue
        kernel = _kernel_key(launch)
        builds = builds_for(launch, target, all_configs=not one_config)
        names = autotune_keys.get(kernel)
        if names is not None and len(builds) > 1:
            key = (tuple(_argument(launch, name) for name in names),
                   tuple(arg.get("type") for arg in launch["args"] if str(arg.get("type", "")).startswith("*")))
            if key in tuned.setdefault(kernel, set()):
                builds = [b for b in builds if _identity(b) in found.get(kernel, {})] or builds[:1]
            tuned[kernel].add(key)
        for b in builds:
            found.setdefault(kernel, {}).setdefault(_identity(b), b)
    return {kernel: list(builds.values()) for kernel, builds in found.items()}


def _argument(launch: dict, name: str) -> Any:
    for arg in launch["args"]:
        if arg["name"] == name:
            return arg.get("constexpr", arg.get("type"))
    return None


def _identity(build) -> tuple:
    """A compile's cache key: kernel, signature, constexprs (specialised arguments among them), divisibility,
    warps and stages."""
    return (build.module, build.kernel, tuple(sorted(build.signature.items())),
            tuple(sorted((k, repr(v)) for k, v in build.constexprs.items())), tuple(sorted(build.divisible)),
            build.num_warps, build.num_stages)


def compile_seconds(builds: dict[str, list], sample: int = SAMPLE) -> dict[str, float]:
    """{kernel: mean seconds of a build}, from `sample` of its builds compiled here (a fresh Triton cache)."""
    from kernels.crosscompile.compiler import build

    seconds = {}
    with tempfile.TemporaryDirectory(prefix="compiles-cache-") as cache:
        os.environ["TRITON_CACHE_DIR"] = str(Path(cache) / "warm-up")
        for found in builds.values():  # the compiler's own start (its libraries loaded), paid once per process
            build(found[0])
            break
        os.environ["TRITON_CACHE_DIR"] = str(Path(cache) / "timed")
        for kernel, found in builds.items():
            picked = found[:: max(1, len(found) // sample)][:sample]
            times = []
            for spec in picked:
                started = time.perf_counter()
                build(spec)
                times.append(time.perf_counter() - started)
            seconds[kernel] = sum(times) / len(times)
    return seconds


def count(assignment: str, sample: int = SAMPLE) -> dict:
    """{"assignment", "tests", "calls", "partial", "kernels": {kernel: {"compiles", "seconds_each"}},
    "compiles", "seconds"} of one assignment: each step in a process of its own."""
    with tempfile.TemporaryDirectory(prefix="compiles-") as folder:
        calls, answer = Path(folder) / "calls.json", Path(folder) / "answer.json"
        for mode, step in (("1", ["--record", assignment, "--out", str(calls)]),
                           ("0", ["--replay", str(calls), "--assignment", assignment, "--sample", str(sample), "--out",
                                  str(answer)])):
            done = subprocess.run([sys.executable, "-m", "autograder.grading.compiles", *step], cwd=ROOT,
                                  env={**os.environ, "TRITON_INTERPRET": mode, "PYTHONHASHSEED": "0"},
                                  capture_output=True, text=True, timeout=3600)
            if done.returncode != 0:  # its own output is noise (the dry run's warnings) unless it failed
                raise RuntimeError(f"counting {assignment}'s compilations failed at {step[0]} (exit "
                                   f"{done.returncode}):\n{done.stderr[-3000:]}")
        return json.loads(answer.read_text())


def replay_and_time(calls_file: Path, assignment: str, sample: int) -> dict:
    recorded = json.loads(calls_file.read_text())
    replayed = replay(recorded["calls"], [assignment])
    builds = compilations(replayed["launches"], replayed["autotune_keys"])
    single = compilations(replayed["launches"], replayed["autotune_keys"], one_config=True)
    seconds = compile_seconds(builds, sample) if sample > 0 else {}
    kernels = {kernel: {"compiles": len(found), "one_config": len(single[kernel]),
                        "seconds_each": round(seconds.get(kernel, 0.0), 2)} for kernel, found in sorted(builds.items())}
    return {"assignment": assignment, "tests": recorded["tests"], "calls": len(recorded["calls"]),
            "partial": replayed["partial"], "kernels": kernels,
            "compiles": sum(k["compiles"] for k in kernels.values()),
            "seconds": round(sum(k["compiles"] * k["seconds_each"] for k in kernels.values()), 1),
            "one_config": sum(k["one_config"] for k in kernels.values()),
            "seconds_one_config": round(sum(k["one_config"] * k["seconds_each"] for k in kernels.values()), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignments", default=",".join(ASSIGNMENTS), help="comma-separated (default: all)")
    parser.add_argument("--sample", type=int, default=SAMPLE, help="builds of each kernel timed (0: none)")
    parser.add_argument("--json", type=Path, help="write the counts here too")
    parser.add_argument("--record", metavar="ASSIGNMENT", help=argparse.SUPPRESS)
    parser.add_argument("--replay", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--assignment", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.record:
        record(args.record, args.out)
        return 0
    if args.replay:
        args.out.write_text(json.dumps(replay_and_time(args.replay, args.assignment, args.sample)))
        return 0
    found = [count(name, args.sample) for name in args.assignments.split(",") if name]
    for one in found:
        print(f"{one['assignment']}: {one['one_config']} compilations a grading, about "
              f"{one['seconds_one_config']:.0f} s of compiling (each autotuned kernel at its first config, as the "
              f"grader's GPU worker launches it); {one['compiles']} and {one['seconds']:.0f} s autotuning every "
              f"config ({one['calls']} calls of {one['tests']} tests; {len(one['partial'])} replayed in part)")
        for kernel, figures in one["kernels"].items():
            print(f"  {kernel}: {figures['one_config']} ({figures['compiles']} autotuning) x "
                  f"{figures['seconds_each']:.2f} s")
    if args.json:
        args.json.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
