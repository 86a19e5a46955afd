"""Isolation by an unprivileged user, for a grader that runs as root where bubblewrap cannot.

Hosted autograders (Gradescope) run the grader as root inside a container whose seccomp profile
usually forbids the namespaces bubblewrap needs. There the worker runs as a user of its own: a
fixed high uid and gid with no passwd entry and no other members, one per grading slot (so that
two submissions graded at once cannot see each other). The launcher drops to it after the fork
(setgroups, setgid, setuid: no capabilities left, and no_new_privs so no setuid program gives any
back) and before any student code exists.

What that user can do is set by permissions: the stage folder is open to its group only, the
submission copy and the worker library are readable, the scratch folder is the only one it may
write, and the grader's own files (reference, suites, everything beside them) are closed to
others. The network is closed by the launcher's seccomp filter (launch.py).

Besides its scratch folder the uid may write wherever any user may: the world-writable folders of this
machine (/tmp, /var/tmp, /dev/shm, /run/lock, ...: `world_writable` finds them all, once), and System V
IPC objects and POSIX message queues, which outlive a process. Where the grader may (root with the right
to make namespaces), the launcher gives the worker private mount and IPC namespaces before it drops to
the uid: every world-writable folder is an empty tmpfs of the worker's own, and everything it writes
there, its IPC objects and its message queues end with its last process. Where even that is refused (a
hosted container), they are swept instead: when grading ends every process of the uid is killed, round
after round until none is left, then every file the uid owns in those folders and every System V IPC
object it owns or made is removed; POSIX message queues, which only a mounted /dev/mqueue lists, are
refused to it by the seccomp filter there (`sweep`). Either way nothing of one submission waits for the
next one graded under the same uid, and the grading log says which of the two ran.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autograder.sandbox.staging import remove_tree

FIRST_UID = 61_000  # above the ranges Debian gives system and login users (they end at 59999)
ACCOUNTS = 64  # slots graded at once on one machine, at most
KILL_PATIENCE = 20.0
# Virtual filesystems of the kernel: nothing there is a folder a process leaves files in.
NOT_WALKED = ("/proc", "/sys")


def _lock_dir() -> Path:
    """Where slots take their uid: /run when we may write it (one place for every grader on this
    machine, whatever their TMPDIR), else the temporary folder."""
    for base in (Path("/run"), Path(tempfile.gettempdir())):
        folder = base / "llmsys-sandbox-users"
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            return folder
        except OSError:
            continue
    raise OSError("no folder to hold the sandbox users' locks")


def _taken_in_passwd() -> set[int]:
    try:
        lines = Path("/etc/passwd").read_text().splitlines()
    except OSError:
        return set()
    return {int(f[2]) for f in (line.split(":") for line in lines) if len(f) > 3 and f[2].isdigit()}


@dataclass
class Account:
    """One uid/gid held by this process (an flock on its lock file) until `release`."""

    uid: int
    gid: int
    lock: int

    @classmethod
    def acquire(cls, sweep_files: bool = True) -> "Account":
        """A free uid of the range, its processes killed and (with `sweep_files`) its files swept: what a grader
        that died without cleaning up left of it. A forked worker reaches none of the machine's folders
        (sandbox.zygote): what the uid left there, it cannot see."""
        folder, taken = _lock_dir(), _taken_in_passwd()
        for uid in range(FIRST_UID, FIRST_UID + ACCOUNTS):
            if uid in taken:
                continue
            fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            account = cls(uid, uid, fd)
            account.kill_all()  # left over by a grader that died without cleaning up
            if sweep_files:
                sweep(uid)
            return account
        raise OSError(f"all {ACCOUNTS} sandbox users (uid {FIRST_UID} and up) are in use")

    def release(self, sweep_files: bool = True) -> list[str]:
        """Kill every process of the uid and sweep what it left (`sweep`; not where it could write none of the
        machine's folders: a forked worker, sandbox.zygote); return what was removed."""
        self.kill_all()
        removed = sweep(self.uid) if sweep_files else []
        os.close(self.lock)
        return removed

    def pids(self) -> list[int]:
        return processes_of(self.uid)

    def kill_all(self, patience: float = KILL_PATIENCE) -> bool:
        """SIGKILL every process of the uid until none is left; False if some remain after `patience`.

        Each round a process running as the uid itself sends kill(-1): the kernel delivers it to every
        process that uid may signal, in one pass, so a fork loop cannot outrun a scan of /proc."""
        deadline = time.monotonic() + patience
        while self.pids():
            if time.monotonic() > deadline:
                return False
            killer = [shutil.which("sh") or "/bin/sh", "-c", "kill -9 -1"]  # the system's shell: always reachable
            try:
                subprocess.run(killer, user=self.uid, group=self.gid, extra_groups=[], timeout=10,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except (OSError, subprocess.SubprocessError):
                pass
            for pid in self.pids():  # and from here, should the killer itself not start
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)
        return True

    def open_stage(self, stage: Path, scratch: Path) -> None:
        """The stage open to this account's group only; the scratch folder its own, and nothing else."""
        os.chown(stage, 0, self.gid)
        stage.chmod(0o750)
        os.chown(scratch, self.uid, self.gid)
        scratch.chmod(0o700)


def closed_to_every_account(info: os.stat_result) -> bool:
    """Whether `info` is a folder that no sandbox user may enter: no search permission for its group or for
    others (with an ACL, the group's bits are its mask: a user named in it with search permission sets them),
    and not a sandbox user's own. None of them can have written anything below it, or reach anything there;
    and none can make a folder so (only its owner may change its mode, and its owner is not one of them)."""
    return (stat.S_ISDIR(info.st_mode) and not info.st_mode & (stat.S_IXGRP | stat.S_IXOTH)
            and not FIRST_UID <= info.st_uid < FIRST_UID + ACCOUNTS)


@functools.lru_cache(maxsize=None)
def world_writable(root: str = "/") -> tuple[str, ...]:
    """Every folder below `root` that any user may write (mode o+w) and a sandbox user can reach, outermost
    only (what lies below one is covered with it), found once by a walk of the machine's filesystems that never
    follows a symlink, skips the kernel's virtual ones (NOT_WALKED) and enters no folder closed to every sandbox
    user (`closed_to_every_account`: root's home, a grader's private temporary folders). About a second on a
    developer's machine: it is asked for only where the worker runs as a user of its own."""
    found: list[str] = []

    def walk(top: str) -> None:
        try:
            entries = os.scandir(top)
        except OSError:
            return
        with entries:
            for entry in entries:
                try:
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_mode & stat.S_IWOTH:
                    found.append(entry.path)
                elif entry.path not in NOT_WALKED and not closed_to_every_account(info):
                    walk(entry.path)

    walk(root)
    return tuple(sorted(found))


def sweep(uid: int) -> list[str]:
    """Remove what `uid` (its processes gone) left where any user may write: its files in every
    world-writable folder and its System V IPC objects. Returns what was removed, as lines for the log."""
    removed = [f"file {path}" for path in remove_files_of(uid, world_writable(), removed_only=True)]
    return removed + remove_ipc_of(uid)


def remove_ipc_of(uid: int) -> list[str]:
    """Remove every System V shared memory segment, message queue and semaphore set that `uid` owns or
    created (/proc/sysvipc/shm, msg and sem of this IPC namespace); return them as "shm 0x4c4c4d53 (id 7)"."""
    libc = ctypes.CDLL(None, use_errno=True)
    # kind: (the id's column, its remover); IPC_RMID is 0
    kinds = {"shm": ("shmid", lambda i: libc.shmctl(i, 0, None)), "msg": ("msqid", lambda i: libc.msgctl(i, 0, None)),
             "sem": ("semid", lambda i: libc.semctl(i, 0, 0))}
    removed = []
    for kind, (column, remove) in kinds.items():
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        header = lines[0].split()
        for line in lines[1:]:
            row = dict(zip(header, line.split()))
            if str(uid) not in (row.get("uid"), row.get("cuid")):
                continue
            ident = int(row[column])
            if remove(ident) == 0:
                removed.append(f"{kind} {int(row['key']):#010x} (id {ident})")
    return removed


def remove_files_of(uid: int, roots: tuple[str, ...], removed_only: bool = False) -> list[str]:
    """Remove every file and folder `uid` owns below `roots` (its processes already gone); return those
    that could not be removed (with `removed_only`: those that were). Symlinks are removed, never followed; the
    grader's own stage folders (root's, named llmsys-*) are not entered: each is removed whole by the grading that
    made it; nor is a folder closed to every sandbox user (`closed_to_every_account`), below which `uid` can have
    written nothing (a clone of this repository in a private temporary folder holds tens of thousands of files)."""
    left, gone = [], []
    for root in roots:
        for top, dirs, files in os.walk(root):  # never through a symlink
            for name in list(dirs) + files:
                path = os.path.join(top, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if name in dirs and (info.st_uid == uid or (info.st_uid == 0 and name.startswith("llmsys-"))
                                     or closed_to_every_account(info)):
                    dirs.remove(name)  # removed whole below, the grader's own, or out of every sandbox user's reach
                if info.st_uid != uid:
                    continue
                try:
                    if os.path.isdir(path) and not os.path.islink(path):
                        if not remove_tree(Path(path)):
                            left.append(path)
                            continue
                    else:
                        os.unlink(path)
                    gone.append(path)
                except OSError:
                    left.append(path)
    return gone if removed_only else left


def share_read_only(folder: Path) -> None:
    """Every file of the submission copy readable, none writable, by the worker (the grader owns them)."""
    folder.chmod(0o755)
    for top, dirs, files in os.walk(folder):  # never through a symlink
        for name in dirs + files:
            path = Path(top) / name
            if not path.is_symlink():
                path.chmod(0o755 if name in dirs else 0o644)


def processes_of(uid: int) -> list[int]:
    """Live processes whose real, effective, saved or filesystem uid is `uid` (not zombies: they run
    nothing, and go once their parent reaps them)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if line.startswith(("State:", "Uid:")))
        except (OSError, ValueError):
            continue
        if str(uid) in fields.get("Uid", "").split() and not fields.get("State", "").strip().startswith("Z"):
            found.append(int(entry))
    return found


def guard_grader(root: Path) -> list[str]:
    """Close the grader's files to other users: every entry at the top of `root` (the repository or
    the unpacked autograder) loses its group and other permissions, except those that hold the
    Python the worker runs. Returns the entries left open."""
    keep = {Path(os.path.realpath(p)) for p in _python_prefixes()}
    left = []
    for entry in sorted(root.iterdir()):
        real = Path(os.path.realpath(entry))
        if entry.is_symlink() or any(real == k or real in k.parents for k in keep):
            left.append(entry.name)
            continue
        mode = entry.stat().st_mode & 0o7777
        if mode & 0o077:
            entry.chmod(mode & 0o700)
    return left


def _python_prefixes() -> list[str]:
    from autograder.sandbox.bwrap import python_prefixes

    return python_prefixes()


@functools.lru_cache(maxsize=None)
def private_namespaces() -> bool:
    """Whether this process may give a worker private mount and IPC namespaces (root, where no seccomp
    profile refuses unshare): asked of a child, so that this process's own namespaces stay as they are."""
    code = "import ctypes, sys; sys.exit(ctypes.CDLL(None, use_errno=True).unshare(0x00020000 | 0x08000000) != 0)"
    try:
        return subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def probe(uid: int = FIRST_UID + ACCOUNTS) -> tuple[bool, str]:
    """(usable, note): whether this process can run Python as another user (it must be root)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "the grader is not root, so it cannot switch the worker to a user of its own"
    try:
        done = subprocess.run([sys.executable, "-s", "-c", "import os; print(os.getuid())"], user=uid, group=uid,
                              extra_groups=[], capture_output=True, text=True, timeout=60, cwd="/")
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"cannot start Python as uid {uid}: {exc}"
    if done.returncode != 0 or done.stdout.strip() != str(uid):
        return False, f"Python cannot run as uid {uid} (is the interpreter readable by others?): {done.stderr[-300:]}"
    return True, "active"
