"""Launcher: apply resource limits, join a pids cgroup, then exec the sandbox command.

Runs as `python -I -S launch.py LIMITS_JSON -- COMMAND...` so that the limits are set in the new
process before any student code exists, without a preexec_fn in the (multi-threaded) grader.
Standard library only: it runs before anything else is importable.
"""

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


def main(argv: list) -> None:
    limits = json.loads(argv[1])
    command = argv[argv.index("--") + 1 :]
    cgroup = limits.pop("cgroup_procs", None)
    if cgroup:
        with open(cgroup, "w") as f:
            f.write(str(os.getpid()))
    for name, value in limits.items():
        resource.setrlimit(NAMES[name], (value, value))
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
