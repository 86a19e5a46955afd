"""The trusted side's handle on one sandboxed worker, and the remote `student` the tests talk to.

A worker is started lazily, asked one request at a time, killed (its whole process group, its PID
namespace under bubblewrap, its pids cgroup) on a timeout, a crash or a protocol violation, and
started afresh for the next request, so only the affected test fails. A call's budget is in CPU
seconds (cputime.py): a call the machine was too busy to finish raises GraderOverloaded instead.

Whose failure a worker that does not start is, the grader decides from what it observed itself: before
any of the submission's code has run in this grading (no request has reached any of its workers), a
worker that dies or hangs before its ready signal is the grader's fault or its machine's overload;
after, it is the submission's (its code may have left something behind that stops the next start),
unless the grader's own reading of the machine (cputime.Machine) shows the cores were busy.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from autograder.model import wire
from autograder.model.results import GRADER_FAULT
from autograder.harness.student import GraderOverloaded, Student, checked_stores, scenario_name
from autograder.sandbox import bwrap, forked, staging, syscalls, user
from autograder.sandbox.cgroups import WorkerCgroup
from autograder.sandbox.cputime import Machine, Meter, backstop, descendants, process_cpu, run_delay
from autograder.sandbox.framing import FrameError, read_frame, write_frame
from autograder.sandbox.policy import Protections
from kernels import first_config, gpu_stand_in

LAUNCHER = Path(__file__).with_name("launch.py")
OUTPUT_TAIL = 3000
MAX_FAILURES = 2  # timeouts or crashes of one function before its later calls fail without running
MAX_IN_A_ROW = 5  # timeouts or crashes in a row, of any functions, before no call runs any more
# Exceptions a test may expect by type; anything else arrives as StudentError.
EXPECTABLE = ("ValueError", "TypeError", "NotImplementedError", "AttributeError", "KeyError",
              "IndexError", "RuntimeError", "ZeroDivisionError", "OverflowError", "ArithmeticError",
              "LookupError", "AssertionError", "ImportError", "ModuleNotFoundError", "MemoryError",
              "RecursionError")


class WorkerError(Exception):
    """The worker timed out, crashed or broke the protocol; the message says which, for the student."""


class GraderFault(GraderOverloaded):
    """The grader's own sandbox could not start a worker before any of the submission had run (bubblewrap
    missing from where it was found, a limit it cannot set): never the student's failure. Like an overload,
    the submission is graded again, and where it fails again the grading is a grader error, not a score."""


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


class CodeRan:
    """Whether any of the submission's code may have run in this grading: set when the first request
    reaches any of its workers (the first one, a restarted one, the builds' or the interpreting one)."""

    def __init__(self) -> None:
        self.value = False


class _Process:
    """One launched worker process: its pipes, its cgroups, and whether it said it is ready."""

    def __init__(self, command: list[str], env: dict[str, str], fds: tuple[int, int, int, int],
                 cwd: Path, output: Path, cgroup: WorkerCgroup | None) -> None:
        req_r, req_w, rep_r, rep_w = fds
        self.to_worker, self.from_worker, self.cgroup, self.ready = req_w, rep_r, cgroup, False
        self.output = output  # its own file: a flood that hit the size limit does not outlive it
        self.cpu = 0.0  # CPU seconds its processes had used when it was killed (those still there then)
        self.delays: dict[int, float] = {}  # pid -> the most run-queue delay it was seen with (no pressure file)
        with open(output, "ab") as out:
            try:
                self.popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                              pass_fds=(req_r, rep_w), env=env, cwd=cwd, start_new_session=True)
            finally:
                os.close(req_r)
                os.close(rep_w)

    def tree(self) -> set[int]:
        """Its processes: those below it, and the members of its cgroup where it has one."""
        return descendants(self.popen.pid, self.cgroup.members() if self.cgroup is not None else ())

    def cpu_seconds(self) -> float | None:
        """Its CPU seconds as its cgroup counts them, or None where it has no CPU account."""
        return self.cgroup.cpu_seconds() if self.cgroup is not None else None

    def counted(self) -> bool:
        return self.cgroup is not None and self.cgroup.cpu is not None

    def run_delay(self) -> float:
        """Seconds its processes were runnable but waited for a core: its cgroup's CPU pressure where it has
        one (processes that ended keep theirs), else the sum of its processes' run-queue delay, each kept at
        the most it was seen at (so a process that ended still counts what it was last seen to have)."""
        pressure = self.cgroup.delay_seconds() if self.cgroup is not None else None
        if pressure is not None:
            return pressure
        for pid in self.cgroup.members() if self.cgroup is not None else self.tree():
            self.delays[pid] = max(self.delays.get(pid, 0.0), run_delay([pid]))
        return sum(self.delays.values())

    def wait_ready(self, timeout: float) -> None:
        if not self.ready:
            if _decode(read_frame(self.from_worker, 1 << 16, time.monotonic() + timeout)) != {"ready": True}:
                raise wire.WireError("the worker's first message was not the ready signal")
            self.ready = True

    def kill(self, settle: float = 0.0) -> int | None:
        """Kill it and everything it started; return its exit status if it had one. What its processes had
        used of the CPU is read into `cpu`: from its cgroup, else (for the grader's accounts only) from
        what /proc shows of them before they are killed."""
        if not self.counted():
            self.cpu = process_cpu(self.tree())
        if settle:
            try:  # it closed its pipe: let it finish dying, to report its own exit status
                self.popen.wait(timeout=settle)
            except subprocess.TimeoutExpired:
                pass
        for fd in (self.to_worker, self.from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        try:  # the whole group, even when the worker itself has exited: children may linger
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroup is not None:
            self.cgroup.remove()
            if self.counted():
                self.cpu = self.cgroup.cpu_seconds() or 0.0
        try:
            return self.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            return None


class _Forked(_Process):
    """A worker forked from a zygote (sandbox.forked): a _Process started by the zygote instead of by exec,
    moved into its own cgroups before it takes a step of its own, killed through them."""

    def __init__(self, zygote: forked.Zygote, stage: str, scratch: str, uid: int, gid: int,
                 fds: tuple[int, int, int, int], output: Path, cgroup: WorkerCgroup) -> None:
        req_r, req_w, rep_r, rep_w = fds
        self.zygote, self.to_worker, self.from_worker, self.cgroup, self.ready = zygote, req_w, rep_r, cgroup, False
        self.output, self.cpu, self.delays = output, 0.0, {}
        self.status: int | None = None
        self.pid = self.inner = None
        try:
            try:
                out = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    self.pid, self.inner = zygote.fork(stage, scratch, uid, gid, (req_r, rep_w, out))
                finally:
                    os.close(out)
            finally:
                os.close(req_r)
                os.close(rep_w)
            for procs in cgroup.procs_files if "cgroup" not in zygote.skip else ():  # before it takes a step
                with open(procs, "w") as f:
                    f.write(str(self.pid))
            write_frame(self.to_worker, wire.encode({"go": True}), time.monotonic() + forked.ASK_TIMEOUT)
        except BaseException:
            if self.pid is not None:  # forked, but not where it may go on: it waits for the go-ahead still
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL)
                self.zygote.wait(self.inner, forked.ASK_TIMEOUT)
            for fd in (req_w, rep_r):
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise

    def tree(self) -> set[int]:
        return set(self.cgroup.members()) | ({self.pid} if self.pid else set())

    def cpu_seconds(self) -> float | None:
        return self.cgroup.cpu_seconds()

    def counted(self) -> bool:
        return self.cgroup.cpu is not None

    def kill(self, settle: float = 0.0) -> int | None:
        if settle and self.inner is not None:  # it closed its pipe: let it end, to report its own exit status
            self.status = self.zygote.wait(self.inner, settle)
        for fd in (self.to_worker, self.from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        self.cgroup.remove()
        self.cpu = self.cgroup.cpu_seconds() or 0.0
        if self.status is None and self.inner is not None:
            self.status = self.zygote.wait(self.inner, forked.ASK_TIMEOUT)
        return os.waitstatus_to_exitcode(self.status) if self.status is not None else None


class Worker:
    """The sandboxed worker of one submission, restarted after every timeout or crash.

    Starting a worker costs an interpreter and a torch import (seconds), so `prestart` begins one
    early (while the grader collects its tests) and, once a worker has died, a spare is kept booting
    in the background so that a submission that crashes often does not cost seconds per test.
    """

    def __init__(self, lib: Path, submission: Path, scratch: Path, protections: Protections, gpu: bool,
                 account: user.Account | None = None, ran: CodeRan | None = None, stand_in: bool = False,
                 zygote: forked.Zygote | None = None) -> None:
        self.lib, self.submission, self.scratch = lib, submission, scratch
        self.protections, self.gpu = protections, gpu
        # A GPU worker on a machine without a GPU, for the grader's GPU rehearsal (kernels.gpu_stand_in).
        self.stand_in = gpu and stand_in
        # The grading server's zygote, where its workers are forked from one (sandbox.forked): a CPU worker whose
        # stage lies in the zygote's folder. Each such worker runs as a user of its own, as in user mode.
        self.zygote = zygote if zygote is not None and not gpu and submission.parent.parent == zygote.root \
            and scratch.parent == submission.parent else None
        self.current: _Process | None = None
        self.spare: _Process | None = None
        self.starts = 0
        self.last_output = ""
        # The worker's own user, where it runs as one; or another worker's of the same submission (`account`),
        # which that worker releases, not this one.
        self.account: user.Account | None = account
        self.owns_account = account is None
        self.shared = False
        self.swept: list[str] = []  # what its user left where anyone may write, removed when it stopped
        # Shared by every worker of this grading (the interpreting sibling, the builds' worker).
        self.ran = ran if ran is not None else CodeRan()
        self.meter: Meter | None = None  # the last call's use of the machine
        self.waited = 0.0  # seconds the calls waited for a worker to finish booting (its handshake)
        self.interpreting: Worker | None = None  # this one's sibling under Triton's interpreter (interpreter())
        # CPU seconds of its processes killed so far (their start, torch's import, the code they ran; its
        # interpreter sibling's too): what the submission's code and its workers cost (make bench-grader reads it)
        self.cpu = 0.0

    def interpreter(self) -> Worker:
        """The worker for scenarios that count what each program of a kernel does (an `interpreted` attribute,
        set on the scenario function), which only Triton's interpreter can show: this one where it
        interprets (a CPU grader); where it compiles (a GPU grader), a second worker of the same submission,
        under the interpreter and without the GPU, started at first need. So those tests grade a submission
        on a GPU machine as they do on a CPU, instead of skipping."""
        if not self.gpu:
            return self
        if self.interpreting is None:
            self.interpreting = Worker(self.lib, self.submission, self.scratch.parent / "scratch-interpreter",
                                       self.protections, gpu=False, account=self.shared_account(), ran=self.ran)
        return self.interpreting

    def prestart(self) -> None:
        if self.current is None:
            self.current = self._launch()

    def request(self, message: dict, timeout: float) -> Any:
        """Send one request; return the decoded, type-checked answer or raise WorkerError/StudentError.

        `timeout` is the call's budget in CPU seconds; the wall clock is only a backstop, and a call it
        stops while under budget raises GraderOverloaded (the machine was too busy, not the code slow)."""
        proc = self.ready()
        self.meter = meter = Meter(proc.cpu_seconds if proc.counted() else None, timeout, delay=proc.run_delay)
        limit = meter.started + (backstop(timeout) if meter.counted else timeout)
        polled = []

        def stop() -> bool:  # asked every 0.2 s that the call waits: has the code used up its budget?
            polled.append(True)
            return meter.verdict() is not None

        try:
            self.ran.value = True  # from here on, what happens to a worker may be the submission's doing
            write_frame(proc.to_worker, wire.encode(message), limit, check=stop)
            reply = _decode(read_frame(proc.from_worker, wire.MAX_FRAME_BYTES, limit, check=stop))
            if polled:  # a short call is charged its wall clock, without a scan of /proc
                meter.read()
            else:
                meter.wall = time.monotonic() - meter.started
        except (FrameError, OSError, wire.WireError) as exc:
            raise self._failure(exc, timeout) from None
        if type(reply) is not dict or len(reply) != 1 or next(iter(reply)) not in ("ok", "error"):
            self._discard()
            raise WorkerError("the worker broke the protocol (a malformed reply); it was restarted")
        if "error" in reply:
            raise rebuild_exception(reply["error"])
        return reply["ok"]

    def stop(self) -> None:
        if self.interpreting is not None:  # first: it may run as this worker's user, released below
            self.interpreting.stop()
            self.cpu += self.interpreting.cpu
            self.interpreting = None
        for proc in (self.current, self.spare):
            if proc is not None:
                self._kill(proc)
        self.current = self.spare = None
        if self.account is not None and self.owns_account:  # and whatever escaped the process groups: all of the uid
            self.swept += self.account.release(sweep_files=self.zygote is None)
            self.account = None

    def shared_account(self) -> user.Account | None:
        """This worker's user, taken now if it runs as one and has none yet, for a second worker of the same
        submission (autograder.grading.ahead); None where the workers run as no user of their own."""
        if (self.protections.user or self.zygote is not None) and self.account is None:
            self.scratch.mkdir(parents=True, exist_ok=True)
            self._take_account()
        return self.account

    def ready(self) -> _Process:
        """The current worker, started and through its handshake (the start is not the call's time)."""
        if self.current is None:
            self.current, self.spare = self.spare or self._launch(), None
        if self.account is not None and not self.shared:  # the submission is in place by the first call
            user.share_read_only(self.submission)
            self.shared = True
        if self.current.ready:  # through its handshake already: no wait, and no reading of the machine's load
            return self.current
        started, machine, delay = time.monotonic(), Machine(), self.current.run_delay()
        try:
            self.current.wait_ready(self.protections.limits.start_timeout)
        except (FrameError, OSError, wire.WireError) as exc:
            raise self._start_failure(exc, machine, delay, self.current) from None
        finally:
            self.waited += time.monotonic() - started
        return self.current

    def _start_failure(self, exc: Exception, machine: Machine, delay: float, proc: _Process) -> Exception:
        """Whose failure a worker that did not start is (the module's docstring): the machine's where it waited
        for a core for most of the wait while the grader saw the cores busy (cputime's "waiting"), else the
        submission's where its code had run in this grading, else the grader's own."""
        wall = time.monotonic() - machine.started
        cpu = proc.cpu_seconds() or 0.0
        busy = min(machine.busy(wall), max(0.0, proc.run_delay() - delay), max(0.0, wall - cpu))
        timed_out = isinstance(exc, FrameError) and str(exc) == "timeout"
        limit = self.protections.limits.start_timeout
        failure = self._failure(exc, limit, starting=True)
        if timed_out and busy >= wall / 2:
            return GraderOverloaded(f"the grader was overloaded: starting the worker took more than {limit:g} s while "
                                    f"the machine's cores were busy for {busy:.0f} s of it; it is graded again with "
                                    "less running beside it")
        if self.ran.value:
            return WorkerError(f"the worker could not start again after your code had run ({failure}); did your "
                               "code leave something behind (files, processes) that stops Python from starting?")
        return GraderFault(f"{GRADER_FAULT}: {failure}")

    def _discard(self, settle: float = 0.0) -> int | None:
        """Kill the current worker and start booting a spare; return the dead one's exit status."""
        code, self.last_output = None, ""
        if self.current is not None:
            code = self._kill(self.current, settle)
            self.last_output = _tail(self.current.output)
            self.current.output.unlink(missing_ok=True)
        self.current = None
        if self.spare is None:
            self.spare = self._launch()
        return code

    def _kill(self, proc: _Process, settle: float = 0.0) -> int | None:
        """proc.kill, its CPU seconds counted in this worker's."""
        code = proc.kill(settle)
        self.cpu += proc.cpu
        return code

    def _launch(self) -> _Process:
        self.scratch.mkdir(parents=True, exist_ok=True)
        if self.zygote is not None:
            return self._fork()
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        env = bwrap.worker_env(*self._paths(), interpret=not self.gpu, threads=1)
        env["LLMSYS_WORKER_FDS"] = f"{req_r},{rep_w}"
        if self.stand_in:
            env[gpu_stand_in.VARIABLE] = "1"
        if self.gpu:  # grading asks whether a kernel is right, not which config is fastest (kernels.first_config)
            env[first_config.VARIABLE] = "1"
        if self.protections.user:
            self._take_account()
            env["USER"] = env["LOGNAME"] = "llmsys-worker"  # a uid without a passwd entry: say who it is
        command = (bwrap.bwrap_command(self.lib, self.submission, self.scratch, env, self.gpu)
                   if self.protections.bwrap else bwrap.worker_argv(sys.executable))
        limits, cgroup = self._rlimits()
        self.starts += 1
        output = self.scratch.parent / f"worker-{self.starts}.log"
        return _Process([sys.executable, "-I", "-S", str(LAUNCHER), json.dumps(limits), "--", *command],
                        {"PATH": env["PATH"]} if self.protections.bwrap else env,
                        (req_r, req_w, rep_r, rep_w), self.scratch, output, cgroup)

    def _fork(self) -> _Process:
        """A worker forked from the zygote, as its own user, in cgroups of its own (sandbox.forked)."""
        self._take_account()
        cgroup = self._cgroup()  # both kinds: forked.available asks for them
        self.starts += 1
        fds = (*os.pipe(), *os.pipe())
        try:
            return _Forked(self.zygote, self.submission.parent.name, self.scratch.name, self.account.uid,
                           self.account.gid, fds, self.scratch.parent / f"worker-{self.starts}.log", cgroup)
        except (forked.ZygoteUnavailable, OSError, FrameError) as exc:
            cgroup.remove()
            raise GraderFault(f"{GRADER_FAULT}: the zygote could not fork a worker ({exc})") from None

    def _cgroup(self) -> WorkerCgroup:
        """The worker's cgroups, each kind the grader found at its start; GraderFault where they cannot be made."""
        pids, cpu = self.protections.pids_cgroup, self.protections.cpu_cgroup
        cgroup = WorkerCgroup.create(self.protections.limits.max_pids, pids, cpu)
        if cgroup is None or (cgroup.pids is None) == pids or (cgroup.cpu is None) == cpu:
            if cgroup is not None:
                cgroup.remove()
            raise GraderFault(f"{GRADER_FAULT}: the worker's cgroups could not be made as they were at the "
                              "grader's start (pids cap, CPU account)")
        return cgroup

    def _rlimits(self) -> tuple[dict[str, Any], WorkerCgroup | None]:
        limits = self.protections.limits
        rlimits: dict[str, Any] = {"cpu": limits.cpu_seconds, "fsize": limits.file_size, "core": 0,
                                   "nofile": limits.open_files}
        if limits.address_space:
            rlimits["as"] = limits.address_space
        cgroup = None
        if self.protections.pids_cgroup or self.protections.cpu_cgroup:
            cgroup = self._cgroup()
            rlimits["cgroup_procs"] = cgroup.procs_files
        if not self.protections.pids_cgroup and self.protections.nproc_rlimit:
            rlimits["nproc"] = limits.max_pids
        if self.account is not None:
            rlimits["user"] = [self.account.uid, self.account.gid]
            if self.protections.private_ns:  # what it writes where anyone may, and its IPC, end with it
                rlimits["private"] = {"cover": list(user.world_writable()),
                                      "keep": sorted({str(self.lib), str(self.submission), str(self.scratch.parent),
                                                      *bwrap.python_prefixes()})}
        if not self.protections.bwrap:  # bubblewrap's own network namespace closes it there
            rlimits["seccomp"] = syscalls.worker_filter(refuse_message_queues=not self.protections.private_ns).hex()
        return rlimits, cgroup

    def _take_account(self) -> None:
        """This worker's own user, and the permissions that confine it: the grader's files closed, the
        stage open to its group, the scratch folder its own."""
        if self.account is None:
            self.account = user.Account.acquire(sweep_files=self.zygote is None)
            if self.zygote is None:  # a forked worker sees none of the grader's files (bubblewrap)
                user.guard_grader(staging.ROOT)
        self.account.open_stage(self.scratch.parent, self.scratch)

    def scratch_inside(self) -> str:
        """The scratch folder's path as the worker sees it."""
        return self._paths()[2]

    def _paths(self) -> tuple[str, str, str]:
        if self.protections.bwrap:
            return bwrap.LIB, bwrap.SUBMISSION, bwrap.SCRATCH
        return str(self.lib), str(self.submission), str(self.scratch)

    def _failure(self, exc: Exception, timeout: float, starting: bool = False) -> Exception:
        timed_out = isinstance(exc, FrameError) and str(exc) == "timeout"
        verdict = None
        if not starting and self.meter is not None and not timed_out:
            self.meter.read()  # a crash: what the call used until then, before its processes are gone
        if timed_out and not starting and self.meter is not None:
            verdict = self.meter.last or self.meter.verdict() or ("overloaded" if self.meter.counted else "wall")
        code = self._discard(settle=0.0 if timed_out else 2.0)
        what = "starting the worker" if starting else "the call"
        if verdict == "overloaded":
            used = self.meter.used
            return GraderOverloaded(f"the grader was overloaded: after {self.meter.wall:.0f} s the call had used "
                                    f"{used.cpu:.1f} of its {timeout:g} CPU seconds, and for {used.waiting:.0f} s the "
                                    "machine had no free core; it is graded again with less running beside it")
        if verdict == "idle":
            reason = (f"the call timed out after {timeout:g} s without computing (waiting on a sleep, a lock, a "
                      "pipe or input that never comes)")
        elif verdict == "wall":
            reason = (f"the call timed out after {timeout:g} s by the clock (an endless loop, far too slow, or "
                      "waiting on something that never comes; this grader counts the wall clock, as it can "
                      "count no CPU time from outside the worker here)")
        elif timed_out and starting:
            reason = f"starting the worker took more than {timeout:g} s"
        elif timed_out:
            reason = (f"the call timed out after {timeout:g} s of CPU time (an endless loop, far too slow, or not "
                      "reading its requests)")
        elif isinstance(exc, wire.WireError):
            reason = f"the worker sent data that is not a valid frame ({exc})"
        else:
            reason = describe_exit(code, what)
        tail = self.last_output
        return WorkerError(reason + (f"\n--- last output of the worker ---\n{tail}" if tail else ""))


def _decode(frame: bytes) -> Any:
    """A reply decoded; whatever goes wrong in doing so is a WireError, never an exception a test could
    take for the student's (a ValueError from an integer too long to parse must not pass
    `pytest.raises(ValueError)`)."""
    try:
        return wire.decode(frame)
    except wire.WireError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise wire.WireError(f"the reply could not be decoded ({type(exc).__name__})") from None


def _tail(path: Path) -> str:
    """The end of a worker's output, for the failure message."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - OUTPUT_TAIL))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def describe_exit(code: int | None, what: str = "the call") -> str:
    """Why a worker ended, `what` it was doing then: "the call", or "starting the worker" (before its ready
    signal, where no call of the submission had run)."""
    when = "during the call" if what == "the call" else f"while {what}"
    if code is None:
        return "the worker stopped answering"
    if code < 0:
        name = signal.Signals(-code).name
        why = {"SIGXCPU": "the CPU-time limit", "SIGXFSZ": "the file-size limit (too much output?)",
               "SIGKILL": "a kill (memory exhausted, or a limit)", "SIGSEGV": "a crash in native code"}
        return f"the worker died from {name} ({why.get(name, 'a signal')}) {when}"
    if what != "the call":
        return f"the worker exited with status {code} {when}, before its ready signal"
    return f"the worker exited with status {code} during the call (os._exit or sys.exit in student code?)"


class RemoteStudent(Student):
    """The `student` fixture when grading: every call and scenario runs in the sandboxed worker.

    Each call has `timeout` seconds of CPU time and all calls together `budget` seconds (what the calls
    cost the submission: CPU and idle time, never the time they waited for a busy machine's cores); a
    function (or scenario) that timed out or killed the worker twice is not called again, and after
    five such failures in a row nothing is. So a submission that loops or crashes costs a bounded time,
    not a timeout per test. A scenario with a `cpu_budget` attribute is the grader's own work (a GPU
    build): it gets that budget instead, outside the submission's.
    """

    def __init__(self, worker: Worker, timeout: float, budget: float = 600.0) -> None:
        self.worker, self.timeout, self.remaining = worker, timeout, budget
        # (scenario name, kwargs) -> (True, answer) of a call already answered elsewhere (the compile checks'
        # builds, started beside the tests: autograder.grading.ahead), or (False, None): ask this worker.
        self.answered_ahead: Callable[[str, dict], tuple[bool, Any]] | None = None
        self.failures: dict[str, int] = {}
        self.in_a_row = 0
        # The grader's own sandbox could not start a worker: every later call would fail the same way, after
        # the same attempt, and the grading is a grader error whatever they do; they fail at once instead.
        self.fault: GraderFault | None = None

    def call(self, target: str, *args: Any, **kwargs: Any) -> Any:
        return self._request(target, {"op": "call", "target": target, "args": list(args), "kwargs": kwargs})

    def run(self, scenario: Callable | str, **kwargs: Any) -> Any:
        name = scenario_name(scenario)
        if self.answered_ahead is not None:
            found, answer = self.answered_ahead(name, kwargs)
            if found:
                return answer
        own = getattr(scenario, "cpu_budget", None)
        worker = self.worker.interpreter() if getattr(scenario, "interpreted", False) else self.worker
        return checked_stores(scenario, kwargs,
                              self._request(name, {"op": "scenario", "name": name, "kwargs": kwargs}, own, worker))

    def _request(self, target: str, message: dict, own: float | None = None, worker: Worker | None = None) -> Any:
        worker = worker or self.worker
        if self.remaining <= 0 and own is None:
            raise WorkerError("not run: this submission used up its grading time budget (endless loops?)")
        if self.failures.get(target, 0) >= MAX_FAILURES:
            raise WorkerError(f"not run: {target} already timed out or killed the worker {MAX_FAILURES} times")
        if self.in_a_row >= MAX_IN_A_ROW:
            raise WorkerError(f"not run: the last {MAX_IN_A_ROW} calls into this submission all timed out "
                              "or killed the worker")
        if self.fault is not None:
            raise GraderFault(str(self.fault))
        try:
            worker.ready()
        except GraderFault as exc:
            self.fault = exc
            raise
        worker.meter = None
        try:
            answer = worker.request(message, own if own is not None else min(self.timeout, self.remaining))
        except WorkerError:
            self.failures[target] = self.failures.get(target, 0) + 1
            self.in_a_row += 1
            raise
        except StudentError:
            self.in_a_row = 0
            raise
        finally:
            if own is None and worker.meter is not None:
                self.remaining -= worker.meter.charged
        self.in_a_row = 0
        return answer
