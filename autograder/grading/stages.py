"""The grader's folders in the temporary directory: private, named after their owner, swept once it is gone.

A grading keeps the copy of a submission, the worker library and the worker's scratch folder in a
*stage* (`llmsys-grade-...`, autograder.grading.runner.Slot); the client keeps the runner's reports in
`llmsys-report-...` and `llmsys-reports-...` (autograder.grading.client). A grader killed with SIGKILL
(a platform's timeout, the OOM killer, a whole process group killed) removes none of them.

So each is made by mkdtemp, mode 0700 (no other local user reads a submission; the user-mode worker is
let in by its group, autograder.sandbox.user.Account.open_stage), with a prefix that names its owner:
the pid, the pid's start time (a pid the kernel gave again later is not taken for the owner), and the
pid namespace (a grader in another container sharing this temporary directory has pids of its own), e.g.
`llmsys-grade-4242-918273-4026531836-k3j2h1ab`. mkdtemp sets the name and the folder in one step: there is no
moment when a live grader's folder exists without its owner written on it, as there would be with an
owner file written after.

`sweep`, at each runner's start, removes the folders of this user, in this pid namespace, whose owner is
no longer running. It never removes a live grader's folder, another user's, a symlink, or a folder whose
owner it cannot read (an older grader's unmarked stage is left alone).
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

from autograder.sandbox.staging import remove_tree

KINDS = ("grade", "report", "reports")
NAME = re.compile(r"llmsys-(?:grade|report|reports)-(\d+)-(\d+)-(\d+)-[^/]+")


def prefix(kind: str) -> str:
    """The mkdtemp prefix of a folder of `kind` owned by this process."""
    if kind not in KINDS:
        raise ValueError(f"{__name__}.prefix: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    pid = os.getpid()
    return f"llmsys-{kind}-{pid}-{start_time(pid) or 0}-{namespace() or 0}-"


def make(kind: str) -> Path:
    """A new private folder (0700) of `kind` in the temporary directory, owned by this process."""
    return Path(tempfile.mkdtemp(prefix=prefix(kind)))


def sweep(folder: Path | None = None) -> list[Path]:
    """Remove the folders in `folder` (the temporary directory) whose owner is gone; return them."""
    here = namespace()
    if here is None:  # no /proc: whether an owner runs cannot be told, so nothing is removed
        return []
    removed = []
    for entry in sorted(Path(folder or tempfile.gettempdir()).glob("llmsys-*")):
        found = NAME.fullmatch(entry.name)
        if found is None:
            continue
        pid, started, space = map(int, found.groups())
        if space != here or start_time(pid) == started:
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and remove_tree(entry):
            removed.append(entry)
    return removed


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks after boot, /proc/PID/stat's 22nd field); None if it is not
    running. A zombie is not: it has ended, and its parent may never reap it (in a container, an orphan's
    new parent is often a pid 1 that reaps nothing), but it keeps its pid, so no other process has it yet."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # the name, in parentheses, may hold anything
        return None if fields[0] in (b"Z", b"X") else int(fields[19])  # fields[0] is the 3rd field, the state
    except (OSError, IndexError, ValueError):
        return None


def namespace() -> int | None:
    """This process's pid namespace (the inode of /proc/self/ns/pid); None without /proc."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
