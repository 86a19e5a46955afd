"""Which protections this machine gives the worker, and how the grading log states them.

Bubblewrap gives the filesystem view (read-only system and submission, one writable scratch
folder, nothing else of this machine), no network and a PID namespace. Where bubblewrap cannot run
but the grader is root (a hosted autograder's container), the worker runs as an unprivileged user of
its own instead (sandbox.user). With neither, grading refuses to start: student code would run with
the grader's rights, free to read the reference and the hidden suites and to rewrite the results,
unless the instructor opts out explicitly (ALLOW_UNSANDBOXED), and then every report says so.
Processes are capped by a
pids cgroup where the grader may create one (root), else by RLIMIT_NPROC, which the kernel enforces
per user namespace for a non-root user (it exempts root, hence the cgroup). A call's CPU seconds are
counted by a cgroup of the worker's too, where one can be made, else its wall clock is charged
(cgroups.py, cputime.py). Resource limits (CPU time, address space, file size, no core dumps) and a
timeout per call always apply.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from autograder.sandbox import cgroups, syscalls, user
from autograder.sandbox.cputime import backstop

MODES = ("auto", "bwrap", "user", "none")
MAX_PIDS = 256
# The explicit opt-out: grade with no isolation at all (a trusted cohort, a laptop without bubblewrap).
ALLOW_UNSANDBOXED = "AUTOGRADER_ALLOW_UNSANDBOXED"
NO_ISOLATION = "NO ISOLATION"


class SandboxUnavailable(RuntimeError):
    """No isolation protects the reference, the hidden suites and the results: grading must not start."""


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 900
    address_space: int | None = 16 << 30  # None on a GPU: CUDA maps far more virtual memory
    file_size: int = 64 << 20
    open_files: int = 1024
    max_pids: int = MAX_PIDS
    call_timeout: float = 60.0
    start_timeout: float = 180.0


@dataclass
class Protections:
    bwrap: bool
    bwrap_note: str
    pids_cgroup: bool
    limits: Limits = field(default_factory=Limits)
    user: bool = False  # the worker runs as an unprivileged user of its own (sandbox.user)
    cpu_cgroup: bool = False  # its CPU is counted by a cgroup of its own (else its wall clock is charged)
    private_ns: bool = False  # a user-mode worker gets private mount and IPC namespaces (else it is swept after)

    @property
    def isolated(self) -> bool:
        return self.bwrap or self.user

    @property
    def nproc_rlimit(self) -> bool:
        return not self.pids_cgroup and (self.user or (self.bwrap and os.geteuid() != 0))

    def lines(self) -> list[str]:
        if self.bwrap:
            fs = ["bubblewrap: active: no network; system, library and submission read-only; a scratch "
                  "folder is the only writable place; solutions, suites, reports and other submissions "
                  "are not visible; own PID namespace"]
        else:
            fs = [f"bubblewrap: NOT active ({self.bwrap_note})"]
        if self.user:
            folders = ", ".join(user.world_writable())
            if self.private_ns:
                left = (f"besides its scratch folder it may write only in private, empty copies of the folders "
                        f"anyone may write ({folders}), in mount and IPC namespaces of its own: those files, its "
                        "System V IPC objects and its POSIX message queues end with it")
            else:
                left = (f"besides its scratch folder it may write in the folders anyone may write ({folders}): "
                        "no private namespaces could be made here, so after grading its files there and its System V "
                        "IPC objects are removed (said below when there were any), and POSIX message queues are "
                        "refused to it")
            fs.append("user: active: the worker runs as an unprivileged user of its own (no capabilities, "
                      "no_new_privs); the reference, suites, results and grader files are closed to it; "
                      f"{left}; all its processes are killed after grading; no network (a seccomp filter refuses "
                      "every socket but AF_UNIX)")
        elif not self.bwrap:
            fs.append(f"{NO_ISOLATION}: the worker ran with the grader's rights: it could read the reference "
                      f"and hidden suites and rewrite results ({ALLOW_UNSANDBOXED} was set); these scores "
                      "are not protected against cheating (only the network is closed: a seccomp filter refuses "
                      "every socket but AF_UNIX)")
        if self.pids_cgroup:
            procs = f"processes: at most {self.limits.max_pids} (pids cgroup; all killed after grading)"
        elif self.nproc_rlimit:
            where = "of the worker's own user" if self.user else "in the user namespace"
            procs = f"processes: at most {self.limits.max_pids} (RLIMIT_NPROC {where})"
        else:
            procs = "processes: NOT limited (no writable pids cgroup, and RLIMIT_NPROC does not bind root)"
        memory = f"{self.limits.address_space >> 30} GiB address space" if self.limits.address_space else "no address-space limit (GPU)"
        if self.cpu_cgroup:
            timeout = (f"timeout: {self.limits.call_timeout:g} s of CPU time per call, counted by the kernel (a cgroup "
                       f"per worker: every process it ran, however it ended), {backstop(self.limits.call_timeout):g} s of "
                       "wall clock as a backstop (a call it stops while the grader saw the machine's cores busy is the "
                       "grader's overload, graded again); the worker is killed and restarted")
        else:
            timeout = (f"timeout: {self.limits.call_timeout:g} s of wall clock per call (no cgroup could be made here, "
                       "so no CPU time is counted from outside the worker); the worker is killed and restarted")
        return [
            *fs,
            procs,
            f"rlimits: {self.limits.cpu_seconds} s CPU, {memory}, {self.limits.file_size >> 20} MiB per "
            "file written (output included), no core dumps",
            timeout,
        ]


@functools.lru_cache(maxsize=None)
def bwrap_status() -> tuple[bool, str]:
    """(usable, note): runs a trivial sandbox once to see whether bubblewrap works here."""
    path = shutil.which("bwrap")
    if path is None:
        return False, "bwrap not found"
    probe = [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"]
    try:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap failed to start: {exc}"
    if result.returncode != 0:
        return False, f"bwrap cannot create namespaces here: {result.stderr.strip()[:200]}"
    return True, "active"


def detect(mode: str = "auto", limits: Limits | None = None) -> Protections:
    """The protections to use, or SandboxUnavailable when there are none and no opt-out.

    `auto`: bubblewrap where it works, else (as root) the unprivileged user; `bwrap` and `user`
    require that one; `none` runs unisolated, and only with the opt-out set."""
    if mode not in MODES:
        raise ValueError(f"sandbox mode must be one of {MODES}, got {mode!r}")
    usable, note = bwrap_status() if mode in ("auto", "bwrap") else (False, f"not used with sandbox mode {mode}")
    if mode == "bwrap" and not usable:
        raise SandboxUnavailable(f"sandbox mode bwrap was asked for, but {note}")
    as_user, user_note = False, ""
    if mode == "user" or (mode == "auto" and not usable):
        as_user, user_note = user_status()
        if mode == "user" and not as_user:
            raise SandboxUnavailable(f"sandbox mode user was asked for, but {user_note}")
    if not (usable or as_user) and os.environ.get(ALLOW_UNSANDBOXED) != "1":
        why = note + (f"; no unprivileged user either: {user_note}" if user_note else "")
        raise SandboxUnavailable(
            f"refusing to grade: no isolation would protect the reference, the hidden suites and the results "
            f"from the student's code ({why}). Install Debian's `bubblewrap` where it can create namespaces, "
            f"or {user_fix()}; to grade without any isolation (trusted code only), set {ALLOW_UNSANDBOXED}=1, and "
            "every report will say so.")
    if not usable:  # the seccomp filter closes the network without bubblewrap: it must compile here
        try:
            syscalls.worker_filter()
        except syscalls.FilterUnavailable as exc:
            raise SandboxUnavailable(f"refusing to grade: without bubblewrap the worker's network is closed by a "
                                     f"seccomp filter, and {exc}") from None
    pids, cpu = cgroups.supported()
    return Protections(bwrap=usable, bwrap_note=note, pids_cgroup=pids, cpu_cgroup=cpu,
                       limits=within_hard_limits(limits or Limits()), user=as_user,
                       private_ns=as_user and user.private_namespaces())


def user_fix() -> str:
    """What makes the unprivileged-user isolation work here: root, and a Python that user can run."""
    if os.geteuid() != 0:
        return "run the grader as root so that the worker runs as an unprivileged user"
    return (f"let the unprivileged user run this grader's Python ({sys.executable}): as root already, the "
            "grader needs an interpreter that other users can read and execute, e.g. Debian's python3 with a "
            "virtual environment outside root's home (make install PYTHON=... or BOOTSTRAP=/usr/bin/python3)")


HARD_LIMITS = {"cpu_seconds": resource.RLIMIT_CPU, "address_space": resource.RLIMIT_AS,
               "file_size": resource.RLIMIT_FSIZE, "open_files": resource.RLIMIT_NOFILE,
               "max_pids": resource.RLIMIT_NPROC}


def within_hard_limits(limits: Limits) -> Limits:
    """`limits`, each lowered to the hard limit this process runs under where that is lower: the
    worker inherits the hard limits, and only a privileged process may raise one."""
    lowered = {}
    for name, kind in HARD_LIMITS.items():
        asked, hard = getattr(limits, name), resource.getrlimit(kind)[1]
        if asked is not None and hard != resource.RLIM_INFINITY and hard < asked:
            lowered[name] = hard
    return dataclasses.replace(limits, **lowered)


@functools.lru_cache(maxsize=None)
def user_status() -> tuple[bool, str]:
    return user.probe()
