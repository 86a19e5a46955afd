"""Launcher: join the worker's cgroups, apply resource limits, drop to the worker's user, exec the sandbox.

Runs as `python -I -S launch.py LIMITS_JSON -- COMMAND...` so that the limits are set in the new
process before any student code exists, without a preexec_fn in the (multi-threaded) grader.
Standard library only: it runs before anything else is importable. It joins the worker's cgroups (a pids
cap, a CPU account: cgroups.py) first, so that every process the worker ever starts is in them, and gives
SIGCHLD its default action, so that no disposition of the grader's is inherited across the exec.

With "private" (root, a worker of its own user: user.py) it gives the worker private mount and IPC
namespaces first: each folder of "cover" (the machine's world-writable folders) becomes an empty tmpfs of
the worker's own, with the folders of "keep" (the stage, the Python installation) that lie below one
mounted back where they were. What the worker writes there, its System V IPC objects and its POSIX
message queues end with its last process.

With a "user" entry (uid, gid) it gives up root for good: no supplementary groups, real, effective
and saved ids all the worker's (which clears every capability), and no_new_privs, so that no setuid
or file-capability program can give any back.

With "seccomp" (where bubblewrap's namespaces are not there to close the network) it installs that
filter (hex of a BPF program compiled by the grader: syscalls.py), inherited by everything the worker
starts and never removable. It needs no privilege: no_new_privs is set first.
"""

import ctypes
import json
import os
import resource
import signal
import sys

NAMES = {
    "cpu": resource.RLIMIT_CPU,
    "as": resource.RLIMIT_AS,
    "fsize": resource.RLIMIT_FSIZE,
    "core": resource.RLIMIT_CORE,
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
}
PR_SET_NO_NEW_PRIVS = 38  # linux/prctl.h
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
CLONE_NEWNS, CLONE_NEWIPC = 0x00020000, 0x08000000  # linux/sched.h
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000  # linux/mount.h
COVER_SIZE = "512m"  # each private tmpfs: it is memory, which no rlimit of the worker's counts


def main(argv: list) -> None:
    limits = json.loads(argv[1])
    command = argv[argv.index("--") + 1 :]
    cgroups = limits.pop("cgroup_procs", [])
    user = limits.pop("user", None)
    for procs in cgroups:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    program = limits.pop("seccomp", "")
    private = limits.pop("private", None)
    if private:
        make_private(private["cover"], private["keep"])
    for name, value in limits.items():
        resource.setrlimit(NAMES[name], (value, value))
    if user:
        drop_to(*user)
    if program:
        install_filter(bytes.fromhex(program))
    try:
        os.execvp(command[0], command)
    except OSError as exc:  # the grader's fault: say what could not be run, and where it was looked for
        raise SystemExit(f"launch: could not run {command[0]!r} ({exc.strerror}; PATH {os.environ.get('PATH', '')!r})")


def drop_to(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != gid or os.getgroups():
        raise SystemExit(f"launch: could not become uid {uid}")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit("launch: could not set no_new_privs")



def _mount(libc, source, target: str, kind, flags: int, data=None) -> None:
    encode = lambda value: None if value is None else value.encode()  # noqa: E731
    if libc.mount(encode(source), target.encode(), encode(kind), flags, encode(data)) != 0:
        raise SystemExit(f"launch: could not mount {target} ({os.strerror(ctypes.get_errno())})")


def _below(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def make_private(cover: list, keep: list) -> None:
    """New mount and IPC namespaces; every folder of `cover` an empty tmpfs, with the folders of `keep`
    below it mounted back at their paths (held open before, so that covering does not hide them)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0:
        raise SystemExit(f"launch: could not make private namespaces ({os.strerror(ctypes.get_errno())})")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the grader's namespace
    outer = [k for k in keep if not any(_below(k, other) and k != other for other in keep)]
    held = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in outer if os.path.isdir(path)}
    for folder in cover:
        _mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={COVER_SIZE}")
        for path, fd in held.items():
            if _below(path, folder):
                os.makedirs(path, mode=0o755, exist_ok=True)
                _mount(libc, f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
    for fd in held.values():
        os.close(fd)


def install_filter(program: bytes) -> None:
    """Install a seccomp filter (a BPF program of 8-byte instructions) on this process, after no_new_privs."""

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    code = ctypes.create_string_buffer(program, len(program))
    libc = ctypes.CDLL(None, use_errno=True)
    prog = Program(len(program) // 8, ctypes.cast(code, ctypes.c_void_p))
    if (libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0):
        raise SystemExit(f"launch: could not install the seccomp filter ({os.strerror(ctypes.get_errno())})")


if __name__ == "__main__":
    main(sys.argv)
