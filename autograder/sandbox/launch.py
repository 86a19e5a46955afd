"""Launcher: join the worker's cgroups, apply resource limits, drop to the worker's user, exec the sandbox.

Runs as `python -I -S launch.py LIMITS_JSON -- COMMAND...` so that the limits are set in the new
process before any student code exists, without a preexec_fn in the (multi-threaded) grader.
Standard library only: it runs before anything else is importable. It joins the worker's cgroups (a pids
cap, a CPU account: cgroups.py) first, so that every process the worker ever starts is in them, and gives
SIGCHLD its default action, so that no disposition of the grader's is inherited across the exec.

With a "user" entry (uid, gid) it gives up root for good: no supplementary groups, real, effective
and saved ids all the worker's (which clears every capability), and no_new_privs, so that no setuid
or file-capability program can give any back.

With "no_network" (where bubblewrap's network namespace is not there to do it) it installs a seccomp
filter, inherited by everything the worker starts and never removable, that refuses every socket but
AF_UNIX (local pipes, which Python's multiprocessing uses) and io_uring (which could open sockets
around the filter). It needs no privilege: no_new_privs is set first.
"""

import ctypes
import errno
import json
import os
import resource
import signal
import struct
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
AF_UNIX = 1
# machine: (AUDIT_ARCH_*, socket, io_uring_setup) from linux/audit.h and the architecture's syscall table
ARCHES = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425)}
X32_BIT = 0x40000000  # x86_64's x32 syscalls: another table, refused whole


def main(argv: list) -> None:
    limits = json.loads(argv[1])
    command = argv[argv.index("--") + 1 :]
    cgroups = limits.pop("cgroup_procs", [])
    user = limits.pop("user", None)
    for procs in cgroups:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    no_network = limits.pop("no_network", False)
    for name, value in limits.items():
        resource.setrlimit(NAMES[name], (value, value))
    if user:
        drop_to(*user)
    if no_network:
        refuse_sockets()
    os.execvp(command[0], command)


def drop_to(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != gid or os.getgroups():
        raise SystemExit(f"launch: could not become uid {uid}")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit("launch: could not set no_new_privs")



def refuse_sockets() -> None:
    """Install the seccomp filter: socket(domain != AF_UNIX) and io_uring_setup fail with EACCES, as
    does every call of another architecture's table or of x32; everything else is allowed."""
    arch, socket_nr, uring_nr = ARCHES.get(os.uname().machine, (None, None, None))
    if arch is None:
        raise SystemExit(f"launch: no seccomp filter for {os.uname().machine}: cannot close the network")
    deny, allow = 0x00050000 | errno.EACCES, 0x7FFF0000  # SECCOMP_RET_ERRNO | errno, SECCOMP_RET_ALLOW
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    program = [  # (code, jump if true, jump if false, k); a jump counts from the next instruction
        (ld, 0, 0, 4),             # 0: seccomp_data.arch
        (jeq, 1, 0, arch),         # 1: this machine's table: 3
        (ret, 0, 0, deny),         # 2
        (ld, 0, 0, 0),             # 3: seccomp_data.nr
        (jge, 5, 0, X32_BIT),      # 4: x32: 10
        (jeq, 0, 2, socket_nr),    # 5: socket: 6, else 8
        (ld, 0, 0, 16),            # 6: args[0], its low 32 bits (little-endian): the domain
        (jeq, 1, 2, AF_UNIX),      # 7: AF_UNIX: 9, else 10
        (jeq, 1, 0, uring_nr),     # 8: io_uring_setup: 10, else 9
        (ret, 0, 0, allow),        # 9
        (ret, 0, 0, deny),         # 10
    ]
    code = b"".join(struct.pack("=HBBI", *instruction) for instruction in program)
    filters = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    prog = Program(len(program), ctypes.cast(filters, ctypes.c_void_p))
    if (libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0):
        raise SystemExit(f"launch: could not install the seccomp filter ({os.strerror(ctypes.get_errno())})")


if __name__ == "__main__":
    main(sys.argv)
