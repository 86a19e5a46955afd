"""The zygote: a warm worker that forks the workers of a grading server's submissions, inside the sandbox.

A grading server (autograder.grading.runner --serve) starts one, under bubblewrap, before any submission
exists: it imports torch, Triton, the harness and the worker loop once (worker.prepare), holds no student
data, and runs no student code. Each worker the server needs after that is a fork of it: a fresh, private
process (copy-on-write), which pays none of those imports again.

Its view is a worker's (sandbox.bwrap: read-only system, Python and worker library, no network, no other
file of the machine) plus the grading server's stage folder at /sandbox/stages, where every submission's
stage lies. It runs as root with three capabilities (CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID), which its
workers need to isolate themselves, and which none of them keeps. Asked for a worker, it forks a child,
and that child, before it reads a byte of the submission (`isolate`):
  1. waits until the grader has moved it into the worker's own cgroups (pids cap, CPU account, kill);
  2. enters new mount, PID, network, IPC and UTS namespaces;
  3. mounts its own submission at /sandbox/submission (read-only) and scratch folder at /sandbox/scratch,
     covers /sandbox/stages (every other stage, and the zygote's socket) with an empty tmpfs, and gives
     itself an empty /tmp and /dev/shm;
  4. forks the namespace's first process (pid 1), which mounts a /proc of that PID namespace only and
     drops to the worker's own uid and gid (no capabilities, no_new_privs);
  5. which forks the worker: it enters a user namespace of its own that maps only its uid (so no other
     user, root included, exists there), drops the capabilities that namespace gave it, and only then
     serves the grader's requests, importing the submission at the first.
No state passes from one worker to the next: each is a fork of the same zygote, which never changes
after its start. The grader kills a worker's cgroup when it is done; pid 1 ending ends every process of
its namespace.

Protocol: a SOCK_SEQPACKET socket at /sandbox/stages/zygote.sock (a folder only root may enter); each
request a connection, one JSON message each way, file descriptors passed with SCM_RIGHTS:
  {"op": "fork", "stage": NAME, "scratch": NAME, "uid": N, "gid": N} + fds (requests, responses, output)
      -> {"pid": the child's pid in the zygote's PID namespace}
  {"op": "wait", "pid": N, "timeout": S} -> {"status": the raw wait status, or None if it has not ended}
  {"op": "ping"} -> {"pong": true}
Standard library and the worker library only.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
import time

STAGES, SUBMISSION, SCRATCH = "/sandbox/stages", "/sandbox/submission", "/sandbox/scratch"
SOCKET = f"{STAGES}/zygote.sock"  # the builds' zygote listens at zygote-builds.sock ($LLMSYS_ZYGOTE_KIND=builds)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000  # linux/sched.h
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8  # linux/mount.h
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 4, 38
# The steps of `isolate`, each of which a test may ask the zygote to skip ($LLMSYS_ZYGOTE_SKIP, set by the
# grader's own tests only) to show that the isolation tests fail without it.
STEPS = ("cgroup", "namespaces", "mounts", "proc", "uid", "userns")
MAX_MESSAGE = 1 << 16

_libc = ctypes.CDLL(None, use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), f"zygote: {what}: {os.strerror(ctypes.get_errno())}")


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda value: None if value is None else value.encode()  # noqa: E731
    _check(_libc.mount(encode(source), target.encode(), encode(kind), flags, encode(data)), f"mount {target}")


def main() -> None:
    from autograder.sandbox import worker

    skip = set(filter(None, os.environ.pop("LLMSYS_ZYGOTE_SKIP", "").split(",")))
    builds = os.environ.pop("LLMSYS_ZYGOTE_KIND", "") == "builds"
    if builds:  # its workers only build: Triton's compiler imported once, compiling, for each compile to fork
        from kernels.crosscompile.request import prepare_compiler

        prepare_compiler()
    worker.prepare()
    if not builds:
        warm()
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")  # no worker reads its memory via /proc
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(SOCKET.replace("zygote.sock", "zygote-builds.sock") if builds else SOCKET)
    listener.listen(8)
    sys.stdout.write("zygote ready\n")
    sys.stdout.flush()
    while True:
        connection, _ = listener.accept()
        with connection:
            fds: list[int] = []
            try:
                message, fds, _, _ = socket.recv_fds(connection, MAX_MESSAGE, 3)
                request = json.loads(message)
                if request.get("op") == "fork" and len(fds) == 3:
                    pid = os.fork()
                    if pid == 0:
                        listener.close()
                        connection.close()
                        _child(request, fds, skip)
                    reply = {"pid": pid}
                elif request.get("op") == "wait":
                    reply = {"status": _wait(int(request["pid"]), float(request["timeout"]))}
                elif request.get("op") == "ping":
                    reply = {"pong": True}
                else:
                    reply = {"error": f"unknown request {str(request)[:200]}"}
            except (OSError, ValueError, KeyError, TypeError) as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            finally:
                for fd in fds:
                    os.close(fd)
            try:
                connection.send(json.dumps(reply).encode())
            except OSError:
                pass


# What a worker's first use of torch would import, paid once here instead of in every worker (the builds' zygote
# imports Triton compiling instead, kernels.crosscompile.request.prepare_compiler: a process that imported Triton
# interpreted cannot compile, and its compiles would each be a new interpreter, torch and all): torch._dynamo
# (with sympy and Triton) comes with the first optimizer (torch.optim wraps its methods in
# torch._disable_dynamo), the first checkpoint or the first FLOP counter; about 1.4 CPU s each time.
WARM_MODULES = ("torch._dynamo", "torch.optim", "torch.utils.checkpoint", "torch.utils.flop_counter",
                "torch.nn.functional", "triton", "triton.language", "einops", "numpy")


def warm() -> None:
    """Import WARM_MODULES (those this Python has), and take one optimizer step through them: the grader's own
    code, on no data of any submission."""
    import importlib

    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    import torch

    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.utils.checkpoint.checkpoint(model, torch.ones(2, 4, requires_grad=True), use_reentrant=False).sum().backward()
    optimizer.step()
    optimizer.zero_grad()


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def _child(request: dict, fds: list[int], skip: set[str]) -> None:
    """The forked child: isolate, then serve (in the namespace's second process). Never returns."""
    code = 70
    try:
        requests, responses, output = fds
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        _close_all_but(0, 1, 2, requests, responses)  # nothing else the zygote holds (its log) goes along
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        from autograder.model import wire
        from autograder.sandbox.framing import read_frame

        if wire.decode(read_frame(requests, 1 << 10)) != {"go": True}:  # in its own cgroups now
            raise OSError("the grader's first message was not the go-ahead")
        code = isolate(request, requests, responses, skip)
    except BaseException as exc:  # noqa: BLE001  (the grader reads the output when the worker does not start)
        print(f"zygote: the worker could not be isolated: {exc}", file=sys.stderr, flush=True)
    finally:
        os._exit(code)


def isolate(request: dict, requests: int, responses: int, skip: set[str]) -> int:
    """Steps 2 to 5 of the module's docstring; returns the exit status to end with (the worker's)."""
    if "namespaces" not in skip:
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    if "mounts" not in skip:
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        stage = f"{STAGES}/{_name(request['stage'])}"
        _mount(f"{stage}/submission", SUBMISSION, None, MS_BIND | MS_REC)
        _mount(None, SUBMISSION, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        _mount(f"{stage}/{_name(request['scratch'])}", SCRATCH, None, MS_BIND | MS_REC)
        _mount("tmpfs", STAGES, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755,size=4k")
        _mount(None, STAGES, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for folder in ("/tmp", "/dev/shm"):
            if os.path.isdir(folder):
                _cover(folder)
    status_r, status_w = os.pipe()
    first = os.fork()
    if first == 0:  # pid 1 of the new PID namespace
        os.close(status_r)
        code = 70
        try:
            code = _first(request, requests, responses, status_w, skip)
        except BaseException as exc:  # noqa: BLE001
            print(f"zygote: the worker's namespace could not be set up: {exc}", file=sys.stderr, flush=True)
        finally:
            os._exit(code)
    os.close(status_w)
    os.close(requests)
    if "uid" not in skip:  # the worker's uid here too: no capability left anywhere, and pid 1 is its to kill
        _drop_to(int(request["uid"]), int(request["gid"]))
    raw = _status_or_grader_gone(status_r, responses, first)
    os.waitpid(first, 0)
    if len(raw) < 4:
        return 70
    status = int.from_bytes(raw, "little")
    if os.WIFSIGNALED(status):  # end as the worker did, so that the grader can say why
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 70


def _python_prefixes() -> set[str]:
    """The folders of this Python and its packages (as sandbox.bwrap.python_prefixes finds them)."""
    return {sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}


def _below(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _cover(folder: str) -> None:
    """An empty tmpfs of this worker's own on `folder`, with the Python installation mounted back where it lay
    below it (a virtual environment in /tmp), read-only as before."""
    kept = sorted(p for p in _python_prefixes() if _below(p, folder) and os.path.isdir(p))
    held = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in kept}
    _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=512m")
    for path, fd in held.items():
        parent = folder
        for part in os.path.relpath(path, folder).split("/"):
            parent = os.path.join(parent, part)
            if not os.path.isdir(parent):
                os.mkdir(parent, 0o755)
                os.chmod(parent, 0o755)
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)


def _status_or_grader_gone(status_r: int, responses: int, first: int) -> bytes:
    """The worker's wait status, as pid 1 sends it; should the grader end first (killed outright: nothing stops its
    workers then), pid 1 is killed, and with it every process of the namespace. The grader's end shows as an error
    on the pipe the worker answers on (its write end, held here for that only: the grader held the read end)."""
    import select

    poll = select.poll()
    poll.register(status_r, select.POLLIN)
    poll.register(responses, 0)  # a pipe's write end reports POLLERR once no reader is left
    raw = b""
    while len(raw) < 4:
        events = dict(poll.poll())
        if events.get(responses):
            os.kill(first, signal.SIGKILL)
            poll.unregister(responses)
        if events.get(status_r):
            chunk = os.read(status_r, 4 - len(raw))
            if not chunk:
                break
            raw += chunk
    os.close(responses)
    return raw


def _first(request: dict, requests: int, responses: int, status_w: int, skip: set[str]) -> int:
    """Pid 1: a /proc of this namespace, the worker's uid, then the worker; reap until it ends."""
    if "proc" not in skip and "namespaces" not in skip:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if "uid" not in skip:
        _drop_to(int(request["uid"]), int(request["gid"]))
    worker = os.fork()
    if worker == 0:
        code = 70
        try:
            os.close(status_w)
            _worker(requests, responses, int(request["uid"]), int(request["gid"]), skip)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # noqa: BLE001
            print(f"zygote: the worker failed: {exc}", file=sys.stderr, flush=True)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(requests)
    os.close(responses)
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == worker:
            os.write(status_w, status.to_bytes(4, "little"))
            return 0


def _drop_to(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)  # from root to a uid that is not: every capability goes
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _worker(requests: int, responses: int, uid: int, gid: int, skip: set[str]) -> None:
    # Its own /proc files its own again (the zygote's are root's, and a fork keeps that): the uid of no other
    # submission, and nothing of the zygote or of pid 1, can read it.
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
    if "userns" not in skip:
        _check(_libc.unshare(CLONE_NEWUSER), "unshare the user namespace")
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
        empty = (_CapData * 2)()
        _check(_libc.capset(ctypes.byref(header), empty), "drop the user namespace's capabilities")
    _fresh_random()
    os.chdir("/" if skip & {"mounts", "uid"} else SCRATCH)  # without those, the scratch folder is not its own
    os.environ["USER"] = os.environ["LOGNAME"] = "llmsys-worker"
    import importlib

    sys.path_importer_cache.clear()  # the submission folder was empty when the zygote looked
    importlib.invalidate_caches()
    from autograder.sandbox import worker

    worker.serve(requests, responses)


def _close_all_but(*keep: int) -> None:
    """Close every file descriptor but `keep`. (os.closerange(a, b) with b <= a may close every fd from a up,
    as close_range does with an empty range's end wrapped around: each range is asked only when not empty.)"""
    low, limit = 0, os.sysconf("SC_OPEN_MAX")
    for fd in sorted(set(keep)) + [limit]:
        if low < fd:
            os.closerange(low, fd)
        low = fd + 1


def _fresh_random() -> None:
    """The generators a fresh process seeds from the operating system's entropy (Python's, torch's, numpy's),
    seeded so again: a fork would otherwise draw the zygote's numbers, the same in every worker."""
    import random

    import torch

    random.seed()
    torch.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _name(text: str) -> str:
    """A folder name of the stage folder, never a path out of it."""
    if not text or "/" in text or text in (".", ".."):
        raise ValueError(f"not a folder name: {text!r}")
    return text


if __name__ == "__main__":
    main()
