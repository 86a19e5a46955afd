"""Which protections this machine gives the worker, and how the grading log states them.

Bubblewrap gives the filesystem view (read-only system and submission, one writable scratch
folder, nothing else of this machine), no network and a PID namespace. Where bubblewrap cannot run
but the grader is root (a hosted autograder's container), the worker runs as an unprivileged user of
its own instead (sandbox.user). With neither, grading refuses to start: student code would run with
the grader's rights, free to read the reference and the hidden suites and to rewrite the results,
unless the instructor opts out explicitly (ALLOW_UNSANDBOXED), and then every report says so.
Processes are capped by a
pids cgroup where the grader may create one (root), else by RLIMIT_NPROC, which the kernel enforces
per user namespace for a non-root user (it exempts root, hence the cgroup). Resource limits (CPU
time, address space, file size, no core dumps) and a wall-clock timeout per call always apply.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

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
            fs.append("user: active: the worker runs as an unprivileged user of its own (no capabilities, "
                      "no_new_privs); the reference, suites, results and grader files are closed to it; the "
                      "scratch folder is the only place it may write; all its processes are killed after "
                      "grading; no network (a seccomp filter refuses every socket but AF_UNIX)")
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
        return [
            *fs,
            procs,
            f"rlimits: {self.limits.cpu_seconds} s CPU, {memory}, {self.limits.file_size >> 20} MiB per "
            "file written (output included), no core dumps",
            f"timeout: {self.limits.call_timeout:g} s of CPU time per call, {backstop(self.limits.call_timeout):g} s of "
            "wall clock as a backstop (a call it stops is the grader's overload, graded again); the worker is "
            "killed and restarted",
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
    return Protections(bwrap=usable, bwrap_note=note, pids_cgroup=PidsCgroup.supported(),
                       limits=within_hard_limits(limits or Limits()), user=as_user)


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
    from autograder.sandbox import user

    return user.probe()


class PidsCgroup:
    """A pids cgroup (v1 or v2) for one worker: caps its processes and kills them all at the end."""

    def __init__(self, max_pids: int) -> None:
        parent = _pids_parent()
        if parent is None:
            raise OSError("no writable pids cgroup")
        self.path = parent / f"llmsys-worker-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(max_pids))
        except OSError:
            self.path.rmdir()
            raise

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def kill_all(self, patience: float = 10.0) -> None:
        """SIGKILL every process of the cgroup until it is empty (forks may race the first round)."""
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        try:
            self.kill_all()
            self.path.rmdir()
        except OSError:
            pass  # a leftover empty cgroup is harmless and is removed with its parent

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def supported() -> bool:
        try:
            PidsCgroup(MAX_PIDS).remove()
            return True
        except OSError:
            return False


def _pids_parent() -> Path | None:
    """The folder under which this process may create a pids cgroup, or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "pids" in controllers.split(","):
            candidate = Path("/sys/fs/cgroup/pids") / rel.lstrip("/")
        elif controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            candidate = Path("/sys/fs/cgroup") / rel.lstrip("/")
            if "pids" not in (candidate / "cgroup.controllers").read_text().split():
                continue
        else:
            continue
        if os.access(candidate, os.W_OK):
            return candidate
    return None
