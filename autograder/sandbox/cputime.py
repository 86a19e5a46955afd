"""What a call into student code costs, observed from outside the submission.

A call into student code has a budget in CPU seconds, not in wall-clock seconds: on a loaded machine
the same code takes longer by the clock while using the same CPU time, and a grade must not depend on
what else the machine was doing. Three numbers tell the cases apart (`Meter.verdict`), none of them
reported by the submission's own processes:

- *cpu*: seconds the worker's processes ran, as the kernel counts them in the worker's cgroup
  (cgroups.py): every process that ever ran there, however it ended (a child reaped by the kernel
  because its parent ignores SIGCHLD, a process stopped with SIGSTOP). The code is over its budget when
  this reaches it: an endless loop, or far too slow.
- *waiting*: seconds its threads were runnable but waited for a core (their run-queue delay, from
  schedstat), but never more than the seconds in which no core the grader may use was free (`Machine`:
  the kernel's idle time of those cores, read by the grader from /proc/stat). That is the machine's
  load, never the code's. Each bound alone can be gamed or is wrong: a submission makes its run-queue
  delay as large as it likes with processes that are always runnable and never run (lowest priority,
  pinned to a core something else keeps busy), but it cannot keep every core busy without running on
  them, and that CPU is counted against it; and a sleeping call on a busy machine waits for no core.
- *idle*: the rest of the wall clock. The code waited for something else: a sleep, a lock, a pipe.
  It is over its budget when idle time alone reaches it.

When the wall clock reaches the backstop before either, the machine, not the code, was too slow:
the grader was overloaded, and the call is graded again later, never counted against the student.

Where no cgroup can be made (a grader that is not root and has no delegated cgroup, a hosted
container), nothing outside the submission counts its CPU, and /proc's counters can be dodged: the
call is charged its wall clock instead (verdict "wall"), which no trick of the submission shortens.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Usage:
    cpu: float = 0.0
    waiting: float = 0.0


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces and parentheses)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def descendants(root: int, extra: tuple[int, ...] = ()) -> set[int]:
    """`root`, every process below it, and `extra` (e.g. a cgroup's members)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [root, *extra]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def run_delay(pids) -> float:
    """Seconds the threads of these processes were runnable but waited for a core (schedstat's run_delay)."""
    total = 0
    for pid in pids:
        try:
            tasks = list((PROC / str(pid) / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                total += int((task / "schedstat").read_text().split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return total / 1e9


def process_cpu(pids: set[int]) -> float:
    """CPU seconds these processes report in /proc (their reaped children's included): what a grader
    without a cgroup can know, for its own accounts (make bench-grader), never for a verdict."""
    cpu = 0.0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            cpu += sum(int(v) for v in fields[11:15]) / TICKS  # utime stime cutime cstime
    return cpu


class Machine:
    """The grader's own reading of the machine's load since it was made: how long the cores this process
    may use (its CPU affinity) were idle, from the kernel's /proc/stat."""

    def __init__(self, cpus: set[int] | None = None) -> None:
        self.cpus = sorted(cpus if cpus is not None else _affinity())
        self.started = time.monotonic()
        self.idle_at_start = self.idle_seconds()

    def idle_seconds(self) -> float:
        """Idle (and waiting-for-I/O) seconds of those cores since boot; 0 where /proc/stat cannot be read."""
        try:
            lines = (PROC / "stat").read_text().splitlines()
        except OSError:
            return 0.0
        total = 0
        for line in lines:
            name, _, rest = line.partition(" ")
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in self.cpus:
                fields = rest.split()
                total += int(fields[3]) + int(fields[4])  # idle, iowait
        return total / TICKS

    def busy(self, wall: float) -> float:
        """Seconds of the last `wall` in which no core was free, at least: the wall clock less the cores'
        idle time since this reading began (their idle periods may not overlap)."""
        return max(0.0, wall - (self.idle_seconds() - self.idle_at_start))


def _affinity() -> set[int]:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def backstop(budget: float) -> float:
    """The wall-clock seconds after which a call under its CPU budget is the grader's overload: generous,
    since a loaded machine can stretch a call several times over."""
    return max(4 * budget, budget + 60.0)


class Meter:
    """One call's use of the machine, from its start. `cpu` reads the worker's CPU seconds from its cgroup
    (cumulative; None where the worker has no CPU account: the wall clock is charged then); `delay` its
    processes' run-queue delay (cumulative; run_delay of its cgroup's members); `machine` is the
    grader's reading of the machine's load over the same time."""

    def __init__(self, cpu: Callable[[], float | None] | None, budget: float, machine: Machine | None = None,
                 delay: Callable[[], float] | None = None) -> None:
        self.cpu, self.budget, self.delay = cpu, budget, delay
        self.started = time.monotonic()
        self.base = cpu() if cpu is not None else None
        # Where the wall clock is charged, no verdict asks the machine's load or the call's wait for a core: neither
        # is read (without a cgroup, the wait is a scan of every process of /proc, at each call).
        self.machine = (machine or Machine()) if self.counted else None
        self.delay_base = delay() if delay is not None and self.counted else 0.0
        self.used = Usage()
        self.wall = 0.0
        self.last: str | None = None  # the verdict that stopped the call, if one did

    @property
    def counted(self) -> bool:
        """Whether the call's CPU is counted from outside (a cgroup); else its wall clock is charged."""
        return self.base is not None

    def read(self) -> Usage:
        self.wall = time.monotonic() - self.started
        if not self.counted:
            self.used = Usage()
            return self.used
        now = self.cpu()
        cpu = max(0.0, now - self.base) if now is not None and self.base is not None else 0.0
        delayed = max(0.0, self.delay() - self.delay_base) if self.delay is not None else self.wall
        waiting = min(self.machine.busy(self.wall), delayed, max(0.0, self.wall - cpu))
        self.used = Usage(cpu, waiting)
        return self.used

    @property
    def idle(self) -> float:
        return max(0.0, self.wall - self.used.cpu - self.used.waiting)

    @property
    def charged(self) -> float:
        """What the call cost the submission: its CPU time and its idle time, not its wait for a core (the
        whole wall clock where its CPU is not counted from outside)."""
        if not self.counted:
            return self.wall
        return min(self.wall, self.used.cpu + self.idle)

    def verdict(self) -> str | None:
        """None while the call may go on; "cpu" or "idle" when the code used up its budget ("wall" where the
        wall clock is charged); "overloaded" when the backstop came first."""
        self.read()
        if not self.counted:
            if self.wall >= self.budget:
                self.last = "wall"
        elif self.used.cpu >= self.budget:
            self.last = "cpu"
        elif self.idle >= self.budget:
            self.last = "idle"
        elif self.wall >= backstop(self.budget):
            self.last = "overloaded"
        return self.last
