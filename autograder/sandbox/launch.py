"""Launcher: apply resource limits, join a pids cgroup, drop to the worker's user, then exec the sandbox.

Runs as `python -I -S launch.py LIMITS_JSON -- COMMAND...` so that the limits are set in the new
process before any student code exists, without a preexec_fn in the (multi-threaded) grader.
Standard library only: it runs before anything else is importable.

With a "user" entry (uid, gid) it gives up root for good: no supplementary groups, real, effective
and saved ids all the worker's (which clears every capability), and no_new_privs, so that no setuid
or file-capability program can give any back.
"""

import ctypes
import json
import os
import resource
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


def main(argv: list) -> None:
    limits = json.loads(argv[1])
    command = argv[argv.index("--") + 1 :]
    cgroup = limits.pop("cgroup_procs", None)
    user = limits.pop("user", None)
    if cgroup:
        with open(cgroup, "w") as f:
            f.write(str(os.getpid()))
    for name, value in limits.items():
        resource.setrlimit(NAMES[name], (value, value))
    if user:
        drop_to(*user)
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


if __name__ == "__main__":
    main(sys.argv)
