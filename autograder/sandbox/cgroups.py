"""A worker's cgroups: the kernel's own count of its processes and of the CPU they used.

    group = WorkerCgroup.create(max_pids=256)      # None where this process may make none
    launch(..., cgroup_procs=group.procs_files)    # the launcher joins them before anything else runs
    group.cpu_seconds()                            # every process that ever ran in it, reaped or not
    group.remove()                                 # kill what is left, then remove the folders

What a worker's processes report about themselves (their /proc counters) is theirs to bend: a child whose
parent ignores SIGCHLD is reaped by the kernel and its CPU is added to no counter, and a process that
stops itself keeps what it had. A cgroup is outside their reach. A process cannot leave it (the
folders are root's or the grader's), and its CPU account (`cpuacct.usage` under cgroup v1, `cpu.stat`'s
`usage_usec` under v2) keeps the time of every task that ever ran in it, however that task ended.

Two controllers matter: pids (a cap on processes, and a list of every one of them to kill at the end)
and CPU accounting. Each is taken from cgroup v1 where its hierarchy is mounted, else from the v2
tree, whichever this process may write (root, or a grader given a delegated v2 subtree). Where it may
write neither, `create` returns None and the worker runs without: policy.Protections says so, the
pids cap falls back to RLIMIT_NPROC and the CPU budget to the wall clock (cputime.py). Where the v2
tree is there too, the worker also gets a folder of it for its CPU pressure (`cpu.pressure`: the time
some task of the worker was runnable but waited for a core, kept across tasks that ended), which
cputime.py bounds by the grader's own reading of the machine.
"""

from __future__ import annotations

import functools
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

PREFIX = "llmsys-worker-"


@dataclass(frozen=True)
class _Place:
    """Where this process may make a child cgroup for one purpose: the parent folder, and its version."""

    parent: Path
    version: int  # 1 or 2


def _unescape(field: str) -> str:
    """A mountinfo path field: spaces, tabs, newlines and backslashes are written in octal there."""
    return field.encode().decode("unicode_escape")


@functools.lru_cache(maxsize=None)
def _mounts() -> tuple[tuple[tuple[str, str, str], ...], str | None, str]:
    """(v1 mounts as (controller, mount point, mount root)), the v2 mount point or None, and its root."""
    v1: list[tuple[str, str, str]] = []
    v2, v2_root = None, "/"
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return (), None, "/"
    for line in lines:
        before, _, after = line.partition(" - ")
        fields, rest = before.split(), after.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        root, point = _unescape(fields[3]), _unescape(fields[4])
        if rest[0] == "cgroup2" and v2 is None:
            v2, v2_root = point, root
        elif rest[0] == "cgroup":
            v1 += [(option, point, root) for option in rest[2].split(",")]
    return tuple(v1), v2, v2_root


def _own() -> tuple[dict[str, str], str | None]:
    """This process's cgroups: {v1 controller: its path in that hierarchy}, and its v2 path (or None)."""
    controllers: dict[str, str] = {}
    unified = None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return {}, None
    for line in lines:
        _, names, rel = line.split(":", 2)
        if names == "":
            unified = rel
        for name in names.split(","):
            controllers[name] = rel
    return controllers, unified


def _under(point: str, root: str, rel: str) -> Path:
    """The folder of cgroup `rel` in a hierarchy mounted at `point` whose mount shows `root` of it."""
    if root != "/" and (rel == root or rel.startswith(root.rstrip("/") + "/")):
        rel = rel[len(root):]
    return Path(point) / rel.lstrip("/")


def _place(controller: str) -> _Place | None:
    """Where a child cgroup for `controller` ("pids", "cpuacct") can be made: its v1 hierarchy, else v2."""
    v1, v2, v2_root = _mounts()
    own, unified = _own()
    for name, point, root in v1:
        if name == controller and controller in own:
            parent = _under(point, root, own[controller])
            if os.access(parent, os.W_OK):
                return _Place(parent, 1)
    if v2 is not None and unified is not None:
        parent = _under(v2, v2_root, unified)
        if os.access(parent, os.W_OK):
            return _Place(parent, 2)
    return None


class WorkerCgroup:
    """The cgroups of one worker: the pids cap (where one can be made) and the CPU account (likewise).
    Both may be the same folder (v2). `procs_files` are what the launcher writes its pid into."""

    def __init__(self, folders: list[Path], pids: Path | None, cpu: tuple[Path, int] | None,
                 pressure: Path | None = None) -> None:
        self.folders, self.pids, self.cpu, self.pressure = folders, pids, cpu, pressure
        self._last_cpu = 0.0

    @classmethod
    def create(cls, max_pids: int, want_pids: bool = True, want_cpu: bool = True) -> WorkerCgroup | None:
        """New cgroups for one worker, or None where this process may make none of those asked for."""
        name = PREFIX + uuid.uuid4().hex[:12]
        made: dict[Path, Path] = {}  # parent -> the new folder under it
        pids = cpu = pressure = None

        def folder(place: _Place) -> Path:
            if place.parent not in made:
                made[place.parent] = place.parent / name
                made[place.parent].mkdir()
            return made[place.parent]

        try:
            if want_pids and (place := _pids_place()) is not None:
                try:
                    path = folder(place)
                    (path / "pids.max").write_text(str(max_pids))
                    pids = path
                except OSError:
                    pass
            if want_cpu and (place := _cpu_place()) is not None:
                try:
                    path = folder(place)
                    cpu = (path, place.version)
                    _read_cpu(cpu)
                except OSError:
                    cpu = None
            if want_cpu and (place := _v2_place()) is not None:
                try:
                    path = folder(place)
                    pressure = path if (path / "cpu.pressure").exists() else None
                except OSError:
                    pass
        finally:
            for path in list(made.values()):
                if path not in (pids, pressure) and (cpu is None or path != cpu[0]):
                    _rmdir(path)
                    made = {k: v for k, v in made.items() if v != path}
        if pids is None and cpu is None:
            return None
        return cls(list(made.values()), pids, cpu, pressure)

    @property
    def procs_files(self) -> list[str]:
        return [str(path / "cgroup.procs") for path in self.folders]

    def members(self) -> tuple[int, ...]:
        """The processes in it now (every folder holds the same ones: the launcher joined them all)."""
        for path in self.folders:
            try:
                return tuple(int(p) for p in (path / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                continue
        return ()

    def cpu_seconds(self) -> float | None:
        """CPU seconds of every process that ever ran in it (None without a CPU account). Never less than
        the last reading: the account only grows, and a folder already removed keeps its last value."""
        if self.cpu is None:
            return None
        try:
            self._last_cpu = max(self._last_cpu, _read_cpu(self.cpu))
        except OSError:
            pass
        return self._last_cpu

    def delay_seconds(self) -> float | None:
        """Seconds in which some task of it was runnable but waited for a core ("some" of its cpu.pressure),
        or None without a v2 folder."""
        if self.pressure is None:
            return None
        try:
            for line in (self.pressure / "cpu.pressure").read_text().splitlines():
                if line.startswith("some "):
                    return int(line.rpartition("total=")[2]) / 1e6
        except (OSError, ValueError):
            pass
        return None

    def kill_all(self, patience: float = 10.0) -> None:
        """SIGKILL every process in it until it is empty (forks may race the first round)."""
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            pids = self.members()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left, read the CPU account a last time, and remove the folders."""
        self.kill_all()
        self.cpu_seconds()
        for path in self.folders:
            _rmdir(path)


def _read_cpu(cpu: tuple[Path, int]) -> float:
    path, version = cpu
    if version == 1:
        return int((path / "cpuacct.usage").read_text()) / 1e9
    for line in (path / "cpu.stat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise OSError(f"{path / 'cpu.stat'} has no usage_usec")


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass  # a leftover empty cgroup is harmless and goes with its parent


@functools.lru_cache(maxsize=None)
def _pids_place() -> _Place | None:
    return _place("pids")


@functools.lru_cache(maxsize=None)
def _cpu_place() -> _Place | None:
    return _place("cpuacct")


@functools.lru_cache(maxsize=None)
def _v2_place() -> _Place | None:
    v1, v2, v2_root = _mounts()
    own, unified = _own()
    if v2 is None or unified is None:
        return None
    parent = _under(v2, v2_root, unified)
    return _Place(parent, 2) if os.access(parent, os.W_OK) else None


@functools.lru_cache(maxsize=None)
def supported() -> tuple[bool, bool]:
    """(pids cap, CPU account): which of the two a worker of this process gets."""
    group = WorkerCgroup.create(16)
    if group is None:
        return False, False
    found = group.pids is not None, group.cpu is not None
    group.remove()
    return found
