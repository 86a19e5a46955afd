"""The trusted side's handle on one sandboxed worker, and the remote `student` the tests talk to.

A worker is started lazily, asked one request at a time, killed (its whole process group, its PID
namespace under bubblewrap, its pids cgroup) on a timeout, a crash or a protocol violation, and
started afresh for the next request, so only the affected test fails.
"""

from __future__ import annotations

import builtins
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from autograder import wire
from autograder.harness.student import Student, scenario_name
from autograder.sandbox import bwrap
from autograder.sandbox.framing import FrameError, read_frame, write_frame
from autograder.sandbox.policy import PidsCgroup, Protections

LAUNCHER = Path(__file__).with_name("launch.py")
OUTPUT_TAIL = 3000
# Exceptions a test may expect by type; anything else arrives as StudentError.
EXPECTABLE = ("ValueError", "TypeError", "NotImplementedError", "AttributeError", "KeyError",
              "IndexError", "RuntimeError", "ZeroDivisionError", "OverflowError", "ArithmeticError",
              "LookupError", "AssertionError", "ImportError", "ModuleNotFoundError", "MemoryError",
              "RecursionError")


class WorkerError(Exception):
    """The worker timed out, crashed or broke the protocol; the message says which, for the student."""


class StudentError(Exception):
    """An exception raised by student code in the worker, rebuilt as a builtin type in the grader."""

    remote_type = ""
    remote_traceback = ""


_REMOTE_TYPES = {name: type(name, (StudentError, getattr(builtins, name)), {}) for name in EXPECTABLE}


def rebuild_exception(error: Any) -> Exception:
    """A grader-side exception from the worker's plain description (type-checked first)."""
    fields = ("type", "builtin", "message", "traceback")
    if type(error) is not dict or set(error) != set(fields) or any(type(error[f]) is not str for f in fields):
        return WorkerError("the worker sent a malformed error description")
    cls = _REMOTE_TYPES.get(error["builtin"], StudentError)
    exc = cls(f"{error['message']}  [raised as {error['type']} in your code]")
    exc.remote_type, exc.remote_traceback = error["type"], error["traceback"]
    return exc


class Worker:
    """One sandboxed worker process for one submission."""

    def __init__(self, lib: Path, submission: Path, scratch: Path, protections: Protections, gpu: bool) -> None:
        self.lib, self.submission, self.scratch = lib, submission, scratch
        self.protections, self.gpu = protections, gpu
        self.output = scratch.parent / "worker-output.log"
        self.proc: subprocess.Popen | None = None
        self.cgroup: PidsCgroup | None = None
        self.starts = 0

    def request(self, message: dict, timeout: float) -> Any:
        """Send one request; return the decoded, type-checked answer or raise."""
        if self.proc is None:
            self._start()
        try:
            write_frame(self._to_worker, wire.encode(message))
            reply = wire.decode(read_frame(self._from_worker, wire.MAX_FRAME_BYTES, time.monotonic() + timeout))
        except (FrameError, OSError, wire.WireError) as exc:
            raise self._failure(exc, timeout) from None
        if type(reply) is not dict or len(reply) != 1 or next(iter(reply)) not in ("ok", "error"):
            self.stop()
            raise WorkerError("the worker broke the protocol (a malformed reply); it was restarted")
        if "error" in reply:
            raise rebuild_exception(reply["error"])
        return reply["ok"]

    def _start(self) -> None:
        limits = self.protections.limits
        self.scratch.mkdir(parents=True, exist_ok=True)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        env = bwrap.worker_env(*self._paths(), interpret=not self.gpu, threads=1)
        env["LLMSYS_WORKER_FDS"] = f"{req_r},{rep_w}"
        command = (bwrap.bwrap_command(self.lib, self.submission, self.scratch, env, self.gpu)
                   if self.protections.bwrap else bwrap.worker_argv(sys.executable))
        out = open(self.output, "ab")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(LAUNCHER), json.dumps(self._rlimits()), "--", *command],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, pass_fds=(req_r, rep_w),
                env={"PATH": env["PATH"]} if self.protections.bwrap else env,
                cwd=self.scratch, start_new_session=True,
            )
        finally:
            out.close()
            os.close(req_r)
            os.close(rep_w)
        self._to_worker, self._from_worker = req_w, rep_r
        self.starts += 1
        try:
            ready = wire.decode(read_frame(rep_r, 1 << 16, time.monotonic() + limits.start_timeout))
        except (FrameError, OSError, wire.WireError) as exc:
            raise self._failure(exc, limits.start_timeout, starting=True) from None
        if ready != {"ready": True}:
            self.stop()
            raise WorkerError("the worker did not start properly")

    def _rlimits(self) -> dict[str, Any]:
        limits = self.protections.limits
        rlimits: dict[str, Any] = {"cpu": limits.cpu_seconds, "fsize": limits.file_size, "core": 0,
                                   "nofile": limits.open_files}
        if limits.address_space:
            rlimits["as"] = limits.address_space
        if self.protections.pids_cgroup:
            self.cgroup = PidsCgroup(limits.max_pids)
            rlimits["cgroup_procs"] = self.cgroup.procs_file
        elif self.protections.nproc_rlimit:
            rlimits["nproc"] = limits.max_pids
        return rlimits

    def _paths(self) -> tuple[str, str, str]:
        if self.protections.bwrap:
            return bwrap.LIB, bwrap.SUBMISSION, bwrap.SCRATCH
        return str(self.lib), str(self.submission), str(self.scratch)

    def _failure(self, exc: Exception, timeout: float, starting: bool = False) -> WorkerError:
        timed_out = isinstance(exc, FrameError) and str(exc) == "timeout"
        if not timed_out and self.proc is not None:
            try:  # it closed its pipe: let it finish dying, to report its own exit status
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        code = self.stop()
        what = "starting the worker" if starting else "the call"
        if timed_out:
            reason = f"{what} timed out after {timeout:g} s (an endless loop, or far too slow)"
        elif isinstance(exc, wire.WireError):
            reason = f"the worker sent data that is not a valid frame ({exc})"
        else:
            reason = describe_exit(code)
        tail = self.output_tail()
        return WorkerError(reason + (f"\n--- last output of the worker ---\n{tail}" if tail else ""))

    def output_tail(self) -> str:
        try:
            with open(self.output, "rb") as f:
                f.seek(max(0, os.path.getsize(self.output) - OUTPUT_TAIL))
                return f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def stop(self) -> int | None:
        """Kill the worker and everything it started; return its exit status if it had one."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        for fd in (self._to_worker, self._from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        try:  # the whole group, even when the worker itself has exited: children may linger
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        try:
            return proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            return None


def describe_exit(code: int | None) -> str:
    if code is None:
        return "the worker stopped answering"
    if code < 0:
        name = signal.Signals(-code).name
        why = {"SIGXCPU": "the CPU-time limit", "SIGXFSZ": "the file-size limit (too much output?)",
               "SIGKILL": "a kill (memory exhausted, or a limit)", "SIGSEGV": "a crash in native code"}
        return f"the worker died from {name} ({why.get(name, 'a signal')}) during the call"
    return f"the worker exited with status {code} during the call (os._exit or sys.exit in student code?)"


class RemoteStudent(Student):
    """The `student` fixture when grading: every call and scenario runs in the sandboxed worker.

    Each call has `timeout` seconds; all calls together have `budget` seconds, so a submission
    that loops forever costs one budget, not one timeout per test.
    """

    def __init__(self, worker: Worker, timeout: float, budget: float = 900.0) -> None:
        self.worker, self.timeout, self.remaining = worker, timeout, budget

    def call(self, target: str, *args: Any, **kwargs: Any) -> Any:
        return self._request({"op": "call", "target": target, "args": list(args), "kwargs": kwargs})

    def run(self, scenario: Callable | str, **kwargs: Any) -> Any:
        return self._request({"op": "scenario", "name": scenario_name(scenario), "kwargs": kwargs})

    def _request(self, message: dict) -> Any:
        if self.remaining <= 0:
            raise WorkerError("not run: this submission used up its grading time budget (endless loops?)")
        started = time.monotonic()
        try:
            return self.worker.request(message, min(self.timeout, self.remaining))
        finally:
            self.remaining -= time.monotonic() - started
