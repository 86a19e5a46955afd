"""The trusted side's handle on a zygote (autograder.sandbox.zygote) and on the workers forked from it.

A grading server starts one zygote (`Zygote.start`) where the machine allows it (`available`: bubblewrap,
root, and cgroups for the pids cap and the CPU account), in a stage folder of its own; each of its
submissions' stages is made inside that folder. A worker of a submission is then forked by it
(sandbox.process._Forked): the zygote forks it, the grader finds its pid as the kernel shows it (never as the zygote or the worker says),
moves it into the worker's own cgroups, and only then lets it go on to isolate itself and serve. It is
killed through its cgroup, and its exit status asked of the zygote, which is its parent.

Everything else (requests, timeouts, CPU accounts, failures) is sandbox.process's, unchanged: a forked
worker is a worker that started faster.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from autograder.sandbox import bwrap
from autograder.sandbox.cgroups import WorkerCgroup
from autograder.sandbox.policy import Protections

LAUNCHER = Path(__file__).with_name("launch.py")
SOCKET = "zygote.sock"
ASK_TIMEOUT = 30.0
# AUTOGRADER_ZYGOTE=never: a grading server starts each worker as an interpreter of its own, as before zygotes
# (to compare the two, or to rule the zygote out when something looks wrong).
SWITCH = "AUTOGRADER_ZYGOTE"


class ZygoteUnavailable(RuntimeError):
    """The zygote could not be started or stopped answering: workers start as separate processes instead."""


def available(protections: Protections, gpu: bool) -> tuple[bool, str]:
    """Whether this grader may fork its workers from a zygote, and if not, why."""
    if gpu:
        return False, "GPU workers start on their own (each has its device's state)"
    if not protections.bwrap:
        return False, "no bubblewrap"
    if os.geteuid() != 0:
        return False, "the grader is not root (a worker's isolation needs new namespaces and a uid of its own)"
    if not (protections.pids_cgroup and protections.cpu_cgroup):
        return False, "no cgroups (a forked worker is counted and killed through its own)"
    return True, "available"


def lines(zygote: "Zygote | None") -> list[str]:
    """What the grading log says of how the workers started."""
    if zygote is None:
        return []
    return ["workers: forked from the grading server's zygote (torch, Triton and the worker loop imported once, "
            "before any submission; it runs no student code); each worker, before it reads the submission, enters "
            "new mount, PID, network, IPC, UTS and user namespaces, sees only its own submission (read-only) and "
            "scratch folder, runs as a uid of its own with no capabilities and no_new_privs, in cgroups of its own"]


class Zygote:
    """One zygote process under bubblewrap, its stage folder `root` (private, 0700) and worker library `lib`."""

    def __init__(self, protections: Protections, root: Path, lib: Path, skip: tuple[str, ...] = (),
                 kind: str = "tests") -> None:
        self.protections, self.root, self.lib = protections, root, lib
        # "tests": the submission's workers, torch._dynamo and Triton imported (zygote.warm); "builds": the
        # compile checks' workers, without Triton, so that each compiles in a fork (kernels.crosscompile.request)
        self.kind = kind
        self.socket = root / (SOCKET if kind == "tests" else "zygote-builds.sock")
        # The builds' zygote beside this one, where there is one (ahead.start forks the builds' worker from it).
        self.builds: Zygote | None = None
        # Isolation steps its workers leave out (zygote.STEPS): for the grader's own tests only, which show that
        # each step is needed.
        self.skip = tuple(skip)
        self.pid: int | None = None  # the zygote's pid as this grader sees it (SO_PEERCRED)
        limits = protections.limits
        self.cgroup = WorkerCgroup.create(limits.max_pids, protections.pids_cgroup, protections.cpu_cgroup)
        if self.cgroup is None:
            raise ZygoteUnavailable("its cgroups could not be made")
        env = bwrap.worker_env(bwrap.LIB, bwrap.SUBMISSION, bwrap.SCRATCH, interpret=True, threads=1)
        if skip:
            env["LLMSYS_ZYGOTE_SKIP"] = ",".join(skip)
        if kind == "builds":
            env["LLMSYS_ZYGOTE_KIND"] = "builds"
        rlimits = {"cpu": limits.cpu_seconds, "fsize": limits.file_size, "core": 0, "nofile": limits.open_files,
                   "cgroup_procs": self.cgroup.procs_files}
        if limits.address_space:
            rlimits["as"] = limits.address_space
        self.output = root / f"zygote-{kind}.log"
        with open(self.output, "ab") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-I", "-S", str(LAUNCHER), json.dumps(rlimits), "--",
                 *bwrap.zygote_command(lib, root, env)],
                env={"PATH": env["PATH"]}, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                cwd=root, start_new_session=True)

    @classmethod
    def start(cls, protections: Protections, root: Path, lib: Path, timeout: float,
              skip: tuple[str, ...] = (), builds: bool = False) -> Zygote:
        """A zygote through its imports, answering (with `builds`, the builds' zygote beside it, in the same
        folder); ZygoteUnavailable (and nothing left running) if not."""
        zygote = cls(protections, root, lib, skip)
        try:
            zygote.wait_ready(timeout)
            if builds:
                zygote.start_builds(timeout)
        except BaseException:
            zygote.stop()
            raise
        return zygote

    def start_builds(self, timeout: float) -> None:
        """Start the builds' zygote beside this one (its folder, library and left-out steps), once a grading asks
        for builds ahead: a server whose submissions build nothing ahead never pays its start (ZygoteUnavailable,
        and nothing left running, if it does not start)."""
        builds = Zygote(self.protections, self.root, self.lib, self.skip, kind="builds")
        try:
            builds.wait_ready(timeout)
        except BaseException:
            builds.stop()
            raise
        self.builds = builds

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.popen.poll() is not None:
                raise ZygoteUnavailable(f"it exited with status {self.popen.returncode}: {self._tail()}")
            try:
                with self._connect(1.0) as connection:
                    pid, uid, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                            struct.calcsize("3i")))
                    if uid == 0 and pid in self.cgroup.members():  # the process this grader started
                        self.pid = pid
                        return
                    raise ZygoteUnavailable(f"its socket is held by pid {pid} (uid {uid}), not by the zygote")
            except (FileNotFoundError, ConnectionRefusedError):
                pass
            if time.monotonic() >= deadline:
                raise ZygoteUnavailable(f"it did not answer within {timeout:g} s: {self._tail()}")
            time.sleep(0.05)

    def healthy(self) -> bool:
        """Whether it still runs and answers (asked before each submission of a grading server), and its
        builds' zygote too."""
        if self.popen.poll() is not None or (self.builds is not None and not self.builds.healthy()):
            return False
        try:
            return self._ask({"op": "ping"}, timeout=5.0) == {"pong": True}
        except ZygoteUnavailable:
            return False

    def fork(self, stage: str, scratch: str, uid: int, gid: int, fds: tuple[int, int, int]) -> tuple[int, int]:
        """A new child given the worker's pipes and output file: (its pid here, its pid in the zygote)."""
        reply = self._ask({"op": "fork", "stage": stage, "scratch": scratch, "uid": uid, "gid": gid}, fds)
        inner = reply.get("pid")
        if type(inner) is not int:
            raise ZygoteUnavailable(f"it could not fork a worker: {reply.get('error', reply)}")
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and _child_of(int(entry.name), self.pid, inner):
                return int(entry.name), inner
        raise ZygoteUnavailable(f"its new child (pid {inner} inside) is not among its processes")

    def wait(self, inner: int, timeout: float) -> int | None:
        """The raw wait status of the child `inner` once it has ended (within `timeout`), else None."""
        try:
            status = self._ask({"op": "wait", "pid": inner, "timeout": timeout}, timeout=timeout + ASK_TIMEOUT)
        except ZygoteUnavailable:
            return None
        return status.get("status") if type(status.get("status")) is int else None

    def stop(self) -> None:
        """Stop the zygote and everything still in its cgroup (its forked workers are in their own)."""
        if self.builds is not None:
            self.builds.stop()
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroup is not None:
            self.cgroup.remove()
        try:
            self.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass

    def _connect(self, timeout: float) -> socket.socket:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        connection.settimeout(timeout)
        # Through a descriptor of its folder: a socket's path holds at most 107 bytes, which a stage folder in a
        # long temporary directory (pytest's, a cluster job's) passes, and then every worker would start on its own.
        folder = os.open(self.socket.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            connection.connect(f"/proc/self/fd/{folder}/{self.socket.name}")
        except BaseException:
            connection.close()
            raise
        finally:
            os.close(folder)
        return connection

    def _ask(self, message: dict, fds: tuple[int, ...] = (), timeout: float = ASK_TIMEOUT) -> dict:
        try:
            with self._connect(timeout) as connection:
                socket.send_fds(connection, [json.dumps(message).encode()], list(fds))
                reply = json.loads(connection.recv(1 << 16) or b"null")
        except (OSError, ValueError) as exc:
            raise ZygoteUnavailable(f"it did not answer ({exc})") from None
        if type(reply) is not dict:
            raise ZygoteUnavailable("it closed the connection without an answer")
        return reply

    def _tail(self) -> str:
        try:
            return self.output.read_text(errors="replace")[-2000:].strip() or "(no output)"
        except OSError:
            return "(no output)"


def _child_of(pid: int, parent: int | None, inner: int) -> bool:
    """Whether process `pid` is a child of `parent` whose pid in its own namespace is `inner` (/proc's word)."""
    try:
        fields = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":\t" in line)
    except OSError:
        return False
    return int(fields.get("PPid", "0")) == parent and fields.get("NSpid", "").split()[-1:] == [str(inner)]
