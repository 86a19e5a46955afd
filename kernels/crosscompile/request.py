"""The grader's compile request: a student's functions run as on a GPU and built, in a subprocess.

An interpreted process (the grader's worker on a CPU) cannot build: run_request answers in a fresh
`python -m kernels.crosscompile --request IN --out OUT` with TRITON_INTERPRET=0.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from kernels.crosscompile.compiler import build, builds_for
from kernels.crosscompile.dryrun import AutogradContext, as_on_a_gpu, imported_anew, torch_dtype, unique_launches
from kernels.crosscompile.report import shorten


def student_parts(request: dict) -> dict:
    """{"forward": launches, "backward": launches} of the student's FlashAttentionTriton run as on a GPU of
    request["target"], or {part: "error message"} for a part whose host code failed (the backward needs the
    forward). The student's module is imported inside the dry run, so that what it asks torch.cuda when
    imported is answered as on that GPU too (answer_request holds imported_anew around it and the builds)."""
    import importlib

    import torch

    from kernels.launches import record_launches

    shape = (*request["lead"], request["n"], request["head_dim"])
    dtype = torch_dtype(request["dtype"])
    ctx, parts = AutogradContext(), {}
    with as_on_a_gpu(request["target"]):
        function = getattr(importlib.import_module(request["module"]), request["function"])
        q, k, v, do = (torch.empty(*shape, dtype=dtype, device="cuda") for _ in range(4))
        for part, step in (("forward", lambda: function.forward(ctx, q, k, v, request["is_causal"])),
                           ("backward", lambda: function.backward(ctx, do))):
            try:
                with record_launches(dry_run=True) as record:
                    step()
            except Exception as exc:  # noqa: BLE001  (the student's host code failed: report it)
                parts[part] = f"{request['function']}.{part} failed when run as on a GPU: {type(exc).__name__}: " \
                              f"{shorten(str(exc))}"
                if part == "forward":
                    parts["backward"] = "not run: the forward failed"
                    break
            else:
                parts[part] = unique_launches(record.launches)
    return parts


def student_calls(request: dict) -> dict:
    """{"launches": [...], "builds": [...]} of the calls request["calls"] (each {"module", "function",
    "args": tensor shapes, "kwargs"}) run as on a GPU of request["target"] on tensors of request["dtype"],
    built for that target at each kernel's first config (every config with all_configs); or {"error": ...}.
    The calls' modules are imported inside the dry run, anew (imported_anew): what they ask torch.cuda when
    imported is answered as on that GPU too, and the builds (which find each kernel by its module's name)
    use those modules."""
    import importlib

    import torch

    from kernels.launches import record_launches

    dtype = torch_dtype(request["dtype"])
    launches = []
    with imported_anew(*dict.fromkeys(call["module"] for call in request["calls"])):
        with as_on_a_gpu(request["target"]):
            for call in request["calls"]:
                where = f"{call['module']}.{call['function']}"
                try:
                    function = getattr(importlib.import_module(call["module"]), call["function"])
                    with record_launches(dry_run=True) as record:
                        function(*(torch.empty(*shape, dtype=dtype, device="cuda") for shape in call["args"]),
                                 **call.get("kwargs", {}))
                except Exception as exc:  # noqa: BLE001  (the student's host code failed: report it)
                    return {"error": f"{where} failed when run as on a GPU: {type(exc).__name__}: "
                                     f"{shorten(str(exc))}"}
                launches += record.launches
        launches = unique_launches(launches)
        try:
            specs = [spec for launch in launches for spec in
                     builds_for(launch, request["target"], request["dtype"], request.get("all_configs", False))]
        except ValueError as exc:
            return {"error": str(exc), "launches": launches}
        return {"launches": launches, "builds": [build(spec).to_dict() for spec in specs]}


def answer_requests(request: dict) -> dict:
    """{"answers": [answer_request(r) for r in request["requests"]]}: several requests in one process, torch
    and Triton imported once. A request whose answering raises gets {"error": ...} in its place.

    Where more than one core is free (build_jobs(): up to BUILD_JOBS of this process's cores), the requests
    are answered that many at a time, each in a child forked once torch, Triton's compiler and
    what the dry run needs are imported (they are imported once, not per child), the heaviest first; each
    child imports the student's modules anew as a single process would, so every answer is the one that
    process would give. A child that dies without an answer (a crash in the compiler, a kill) costs only
    its own request's answer."""
    requests = list(request["requests"])
    jobs = min(len(requests), build_jobs())
    if jobs <= 1 or not hasattr(os, "fork"):
        return {"answers": [_answer_or_error(one) for one in requests]}
    _import_before_fork()
    return {"answers": _forked_answers(requests, jobs)}


# Compile requests answered at once in one compiler process, at most: two keep a grader's builds, beside its
# tests, off the critical path on two cores (a request is a second or more of compiling).
BUILD_JOBS = 2


JOBS_VARIABLE = "LLMSYS_BUILD_JOBS"


def build_jobs() -> int:
    """How many requests to answer at once: $LLMSYS_BUILD_JOBS where set (an int >= 1), else BUILD_JOBS, or
    fewer where this process may use fewer cores."""
    chosen = os.environ.get(JOBS_VARIABLE, "")
    if chosen:
        if not chosen.isdigit() or int(chosen) < 1:
            raise ValueError(f"{JOBS_VARIABLE} must be an int >= 1 (compile requests answered at once), got {chosen!r}")
        return int(chosen)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        cores = os.cpu_count() or 1
    return max(1, min(BUILD_JOBS, cores))


def _answer_or_error(one: dict) -> dict:
    try:
        return answer_request(one)
    except Exception as exc:  # noqa: BLE001  (one request's failure is that request's answer)
        return {"error": f"the compile request failed: {type(exc).__name__}: {shorten(str(exc))}"}


# Whether this process imported Triton compiling, to fork its compiles (prepare_compiler).
_COMPILER_READY: list[bool] = []


def prepare_compiler() -> bool:
    """Import Triton compiling (TRITON_INTERPRET=0), and what each compile needs, in a process whose compiles are
    forks of it (a grading server's builds' zygote, autograder.sandbox.zygote): run_request then forks instead of
    starting an interpreter. False, and nothing done, where Triton was imported already: its mode is fixed then."""
    if _COMPILER_READY:
        return True
    if "triton" in sys.modules:
        return False
    os.environ["TRITON_INTERPRET"] = "0"
    _import_before_fork()
    _COMPILER_READY.append(True)
    return True


def _import_before_fork() -> None:
    """What every request imports (torch, fake tensors, Triton's compiler and its NVIDIA backend) and what every
    build's cache key computes once per process (a hash of Triton's own sources and library, ptxas's version):
    once here, so that the forked children share it instead of each paying for it (0.4 s of CPU each for the
    hash)."""
    import torch._dynamo.config  # noqa: F401  (FakeTensorMode imports it when it is made)
    import torch._subclasses.fake_tensor  # noqa: F401
    import triton.compiler  # noqa: F401
    from triton.backends.nvidia import compiler

    from kernels.hardware import TARGETS

    try:  # only a saving: a Triton that keeps these elsewhere computes them in each child, as before
        from triton.runtime.cache import triton_key

        triton_key()
        for arch in TARGETS.values():
            compiler.get_ptxas_version(arch)
    except Exception:  # noqa: BLE001
        pass


def _weight(one: dict) -> int:
    """A request's expected cost, to start the heaviest first: a backward builds several kernels."""
    if "calls" in one or "requests" in one:
        return len(one.get("calls", ())) + sum(_weight(r) for r in one.get("requests", ()) if isinstance(r, dict))
    parts = one.get("parts", ("forward", "backward"))
    return 3 * ("backward" in parts) + ("forward" in parts)


def _forked_answers(requests: list[dict], jobs: int) -> list[dict]:
    """answer_request of each request in a forked child, `jobs` at a time; the answers in the requests' order."""
    answers: list[dict | None] = [None] * len(requests)
    order = sorted(range(len(requests)), key=lambda i: -_weight(requests[i]))
    running: dict[int, int] = {}  # pid -> index
    with tempfile.TemporaryDirectory(prefix="builds-") as folder:
        def path(index: int) -> Path:
            return Path(folder) / f"answer-{index}.json"

        while order or running:
            while order and len(running) < jobs:
                index = order.pop(0)
                running[fork_answer(lambda: _answer_or_error(requests[index]), path(index))] = index
            pid, status = os.wait()
            index = running.pop(pid, None)
            if index is None:
                continue
            try:
                answers[index] = json.loads(path(index).read_text())
            except (OSError, ValueError):
                answers[index] = {"error": f"the compiler process of this request ended without an answer "
                                           f"({_ended(status)})"}
    return [answer if isinstance(answer, dict) else {"error": "no answer"} for answer in answers]


def fork_answer(answer, outbox: Path) -> int:
    """Fork a child that writes answer() to `outbox` as JSON and exits at once (without this process's exit
    handlers): 0 once written, 1 if answer() raised (its traceback on the child's stderr); its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            outbox.write_text(json.dumps(answer()))
            code = 0
        except BaseException:  # noqa: BLE001  (the parent reports a child without an answer)
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"


def answer_request(request: dict) -> dict:
    """For each part asked for (request["parts"], default both of "forward" and "backward"):
    {"launches": [...], "builds": [...]} or {"error": "..."}.

    The request: module and function (an autograd.Function with static forward and backward), dtype
    ("bf16", "fp16"), target ("sm_90"), lead dims, n, head_dim, is_causal, and all_configs (build every
    autotune config, not only the first). A request with "calls" (plain functions, gpu_kernels') is
    answered by student_calls instead; one with "requests" (several), by answer_requests."""
    from kernels.gpu_stand_in import refuse_a_forked_compile

    refuse_a_forked_compile()  # the grader's GPU rehearsal: CUDA's rule in a child of a GPU worker's stand-in
    if "requests" in request:
        return answer_requests(request)
    if "calls" in request:
        return student_calls(request)
    answer = {}
    wanted = request.get("parts", ("forward", "backward"))
    with imported_anew(request["module"]):  # the builds find each kernel by its module's name: the same modules
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


# The warm compiler a trusted caller names for run_request (kernels.crosscompile.server): its socket's path. Seconds
# an asker waits for it beyond the request's own timeout (which the server holds its child to), and to connect.
SERVER_VARIABLE = "LLMSYS_COMPILE_SERVER"
SERVER_MARGIN = 30.0


# CPU seconds one graded build request may use (the grader's own work, apart from the student's per-call
# budget: the scenarios that call run_request carry it as their `cpu_budget`); the wall-clock timeout below is
# only a backstop, far above what a loaded machine needs, since the grader's CPU accounting stops a request first.
BUILD_CPU_SECONDS = 300.0


def run_request(request: dict, timeout: float = 3600.0) -> dict:
    """Answer `request` in a fresh process where Triton compiles (TRITON_INTERPRET=0).

    For interpreted processes (the grader's worker on a CPU). Where this process has not imported Triton yet, or
    imported it compiling (prepare_compiler: a grading server's worker that builds beside the tests,
    autograder.grading.ahead), and no GPU is in reach (_gpu_in_reach), the process is a child forked from this
    one, which sets TRITON_INTERPRET=0 before anything imports Triton: it skips an interpreter's start and
    torch's import (over a second of CPU per request). Otherwise it is a new `python -m
    kernels.crosscompile --request IN --out OUT`. Either way it has this process's import path, limits,
    sandbox and TRITON_CACHE_DIR, imports the student's modules anew (imported_anew), and its result comes
    back through a file, so that what the code prints cannot corrupt it. A trusted caller that named a warm
    compiler in $LLMSYS_COMPILE_SERVER (kernels.crosscompile.server) gets, instead of the new process, a child
    of that server with this process's folder, environment and import path, but the server's limits; never
    where a GPU is in reach.
    """
    with tempfile.TemporaryDirectory() as scratch:
        inbox, outbox = Path(scratch) / "request.json", Path(scratch) / "answer.json"
        gpu = _gpu_in_reach()
        if ("triton" not in sys.modules or _COMPILER_READY) and hasattr(os, "fork") and not gpu:
            return _forked_request(request, outbox, timeout)
        inbox.write_text(json.dumps(request))
        # This process's import path (the submission or tree included), so the child imports the same modules.
        import_path = [p for p in sys.path if p and Path(p).is_dir()]
        env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": os.pathsep.join(import_path)}
        served = None if gpu else _served(inbox, outbox, env, import_path, timeout)
        if served is not None:
            return served
        try:
            done = subprocess.run([sys.executable, "-m", "kernels.crosscompile", "--request", str(inbox), "--out",
                                   str(outbox)], env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"compiling took more than {timeout:.0f} s"}
        if not outbox.exists():
            tail = (done.stderr or done.stdout)[-1500:]
            return {"error": f"the compiler process ended without an answer (exit {done.returncode}): {tail}"}
        return json.loads(outbox.read_text())


def _served(inbox: Path, outbox: Path, env: dict[str, str], import_path: list[str], timeout: float) -> dict | None:
    """The answer of the warm compiler named by $LLMSYS_COMPILE_SERVER (kernels.crosscompile.server), a child of
    it standing for the new process with this process's folder, environment and import path; None where no
    server is named or none answers (a new process answers then)."""
    where = os.environ.get(SERVER_VARIABLE)
    if not where:
        return None
    printed = outbox.with_name("printed")
    reply = ask_server(where, inbox, outbox, printed, env, import_path, timeout)
    if reply is None:
        return None
    return {"error": reply["error"]} if "error" in reply else read_answer(outbox, printed, reply["status"])


def ask_server(path: str, inbox: Path, outbox: Path, printed: Path, env: dict[str, str], import_path: list[str],
               timeout: float) -> dict | None:
    """The reply of the warm compiler at `path` (kernels.crosscompile.server) to one request ({"status": ...} or
    {"error": ...}); None where no server answers at `path` (the caller then starts a process of its own)."""
    try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.settimeout(SERVER_MARGIN)
        connection.connect(path)
        connection.settimeout(timeout + SERVER_MARGIN)  # the server stops its child at `timeout`; a stuck server
    except OSError:
        return None
    message = {"inbox": str(inbox), "outbox": str(outbox), "printed": str(printed), "cwd": os.getcwd(),
               "env": env, "path": import_path, "timeout": timeout}
    with connection, connection.makefile("rwb") as stream:
        try:
            stream.write(json.dumps(message).encode() + b"\n")
            stream.flush()
            line = stream.readline()
        except OSError:  # a timeout among them: the server stopped answering
            return None
    try:
        return json.loads(line)
    except ValueError:
        return None  # the server ended mid-request: a process of the caller's own answers instead


def _gpu_in_reach() -> bool:
    """Whether this process may have started CUDA, or sees a GPU it could start it on (the grader's worker on a
    GPU machine, its device files bound). A child forked from a process that has started CUDA, even only to
    count the devices, cannot use it ("Cannot re-initialize CUDA in forked subprocess"), and a compile on a
    GPU machine asks Triton's driver about the device: there run_request starts a new process instead. A worker
    that stands for a GPU worker (the grader's GPU rehearsal, kernels.gpu_stand_in) counts as one."""
    import glob

    from kernels.gpu_stand_in import cuda_in_reach

    torch = sys.modules.get("torch")
    started = torch is not None and hasattr(torch, "cuda") and torch.cuda.is_initialized()
    return started or bool(glob.glob("/dev/nvidia*")) or cuda_in_reach()


def _forked_request(request: dict, outbox: Path, timeout: float) -> dict:
    """run_request's answer from a forked child: like the new process, it keeps no file of this one open
    (the worker's pipes to the grader above all), writes what it prints to a file of its own, and answers
    through `outbox`."""
    printed = outbox.with_name("printed")

    def answer() -> dict:
        into_own_files(printed)
        os.environ["TRITON_INTERPRET"] = "0"
        return answer_request(request)

    status = wait_for(fork_answer(answer, outbox), timeout)
    return overran(timeout) if status is None else read_answer(outbox, printed, status)


def into_own_files(printed: Path) -> None:
    """In a forked child: none of its parent's files left open (a worker's pipes to the grader, a server's
    sockets), and what it prints written to `printed`."""
    os.closerange(3, _max_fd())
    handle = os.open(printed, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(handle, 1)
    os.dup2(handle, 2)
    os.close(handle)


def wait_for(pid: int, timeout: float) -> int | None:
    """The wait status of the forked child `pid`; None where it ran past `timeout` seconds (it is killed then)."""
    import signal
    import time

    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.02)


def overran(timeout: float) -> dict:
    return {"error": f"compiling took more than {timeout:.0f} s"}


def read_answer(outbox: Path, printed: Path, status: int) -> dict:
    """The answer a compiler process (a child forked here or by the warm compiler) left in `outbox`; where it left
    none, an error with its wait status and the end of what it printed."""
    if not outbox.exists():
        tail = printed.read_text(errors="replace")[-1500:] if printed.exists() else ""
        return {"error": f"the compiler process ended without an answer ({_ended(status)}): {tail}"}
    return json.loads(outbox.read_text())


def _max_fd() -> int:
    try:
        return min(os.sysconf("SC_OPEN_MAX"), 1 << 16)
    except (AttributeError, ValueError, OSError):
        return 1024


def run_requests(requests: list[dict], timeout: float = 3600.0) -> list[dict]:
    """The answers of several requests from one compiler process (run_request): a check's builds in bf16
    and fp16 pay for one start of torch and Triton, not two. Where that process fails as a whole (it
    crashed, or gave no answer for each request), each request is answered in a process of its own, so
    that what breaks the compiler in one build costs only that build's answer."""
    if len(requests) == 1:
        return [run_request(requests[0], timeout)]
    answer = run_request({"requests": list(requests)}, timeout)
    answers = answer.get("answers") if isinstance(answer, dict) else None
    if isinstance(answers, list) and len(answers) == len(requests) and all(isinstance(a, dict) for a in answers):
        return answers
    return [run_request(one, timeout) for one in requests]


def run_grouped(answers: dict, groups: list[tuple[str, list[dict]]], timeout: float = 3600.0) -> None:
    """Answer each (key, requests) of `groups` whose key `answers` lacks, into answers[key] ({dtype: answer}),
    every request in one compiler process (run_requests: each request is answered as alone, and where that
    process fails as a whole, each in a process of its own). For a grader's worker that asks for every build
    of its checks at once (autograder.grading.ahead): one start of torch and Triton instead of one per check."""
    pending = dict((key, requests) for key, requests in groups if key not in answers)
    flat = [request for requests in pending.values() for request in requests]
    found = iter(run_requests(flat, timeout) if flat else [])
    for key, requests in pending.items():
        answers[key] = {request["dtype"]: next(found) for request in requests}
