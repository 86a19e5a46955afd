"""The command that starts a worker: what it sees, under bubblewrap or (without it) as a plain process.

Inside bubblewrap the worker sees only: the system's /usr (and the /bin, /lib symlinks), a few files
of /etc that the dynamic loader and Python read, the Python installation and virtual environment
(read-only), the worker library at /sandbox/lib (read-only), the submission at /sandbox/submission
(read-only) and /sandbox/scratch, its only writable folder. No network, no other files of this
machine: not the repository, not the solutions, suites, reports or other submissions.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from pathlib import Path

LIB, SUBMISSION, SCRATCH = "/sandbox/lib", "/sandbox/submission", "/sandbox/scratch"
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/alternatives", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf")


def python_prefixes() -> list[str]:
    """Folders that hold this Python and its packages (the venv and the base installation)."""
    prefixes = {sys.prefix, sys.base_prefix, str(Path(os.path.realpath(sys.executable)).parents[1])}
    return sorted(p for p in prefixes if not p.startswith("/usr"))


def worker_env(lib: str, submission: str, scratch: str, interpret: bool, threads: int) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": scratch,
        # The library first: a submission cannot shadow the worker, the scenarios or kernels. Both are
        # read-only to the worker; the scratch folder (its working directory) is never on sys.path (-P).
        "PYTHONPATH": f"{lib}:{submission}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "LLMSYS_THREADS": str(threads),
        "TRITON_CACHE_DIR": f"{scratch}/.triton",
        "MPLCONFIGDIR": f"{scratch}/.matplotlib",
        "MPLBACKEND": "Agg",
        "TORCHINDUCTOR_CACHE_DIR": f"{scratch}/.inductor",
        "LANG": "C.UTF-8",
    }
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return env


def worker_argv(python: str) -> list[str]:
    """The worker's command. `-m` alone would put the working directory, the scratch folder the submission
    writes, first on sys.path: a `kernels.py` left there by one call would be imported by the next worker
    before its ready signal. `-P` keeps it off (the import path is the library, the submission and the
    Python installation, none of them writable by the worker); `-s` the user's site folder."""
    return [python, "-P", "-s", "-m", "autograder.sandbox.worker"]


def gpu_devices() -> list[str]:
    """The NVIDIA device files a GPU worker's sandbox binds (/dev/nvidia0, nvidiactl, nvidia-uvm, ...)."""
    return sorted(glob.glob("/dev/nvidia*"))


def system_view(open_parents: bool = False) -> list[str]:
    """bubblewrap's arguments for what every worker sees of the system: /usr and its links, a few files of
    /etc, the Python installation and virtual environment (all read-only), a /proc, a /dev and a /tmp. With
    `open_parents`, the folders above the Python installation are made 0755 (bubblewrap makes them 0700): for
    workers that drop to a uid of their own inside (a zygote's), and must still import from it."""
    cmd = ["--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    for path in ETC_FILES:
        if os.path.exists(path):
            cmd += ["--ro-bind", path, path]
    for prefix in python_prefixes():
        for parent in reversed(Path(prefix).parents[:-1]) if open_parents else ():
            cmd += ["--perms", "0755", "--dir", str(parent)]
        cmd += ["--ro-bind", prefix, prefix]
    return cmd


def _environment(env: dict[str, str]) -> list[str]:
    cmd = ["--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    return cmd


def bwrap_command(lib: Path, submission: Path, scratch: Path, env: dict[str, str], gpu: bool) -> list[str]:
    # The path that policy.bwrap_status probed, not the name: the launcher runs it with the worker's PATH,
    # which need not hold the folder where the grader found bubblewrap.
    cmd = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
           *system_view()]
    if gpu:
        for device in gpu_devices():
            cmd += ["--dev-bind", device, device]
    cmd += ["--ro-bind", str(lib), LIB, "--ro-bind", str(submission), SUBMISSION,
            "--bind", str(scratch), SCRATCH, "--chdir", SCRATCH]
    return cmd + _environment(env) + worker_argv(sys.executable)


STAGES = "/sandbox/stages"
# What a zygote keeps of root's capabilities, for its forked workers to isolate themselves (new namespaces,
# their own mounts, their own uid), none of which a worker keeps (autograder.sandbox.zygote).
ZYGOTE_CAPS = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID")


def zygote_command(lib: Path, stages: Path, env: dict[str, str]) -> list[str]:
    """The zygote's command (a grader running as root): a worker's view of the system and library, the grading
    server's stage folder at /sandbox/stages, empty mount points for a worker's submission and scratch folder;
    its own PID, network, IPC and UTS namespaces; every capability dropped but ZYGOTE_CAPS."""
    cmd = [shutil.which("bwrap") or "bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
           "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for cap in ZYGOTE_CAPS:
        cmd += ["--cap-add", cap]
    # The folders a worker reaches after it dropped to its own uid open to it (bubblewrap makes those it makes
    # 0700): above the Python installation (after /tmp's tmpfs, which a virtual environment may lie below), and
    # the /sandbox mount points.
    cmd += [*system_view(open_parents=True), "--perms", "0755", "--dir", "/sandbox", "--ro-bind", str(lib), LIB,
            "--bind", str(stages), STAGES, "--perms", "0755", "--dir", SUBMISSION, "--perms", "0755", "--dir", SCRATCH,
            "--chdir", "/"]
    return cmd + _environment(env) + [sys.executable, "-P", "-s", "-m", "autograder.sandbox.zygote"]
