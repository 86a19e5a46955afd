"""What a worker's processes consume, so that a call is judged by the code's own use of the machine.

A call into student code has a budget in CPU seconds, not in wall-clock seconds: on a loaded machine
the same code takes longer by the clock while using the same CPU time, and a grade must not depend on
what else the machine was doing. Three numbers tell the cases apart (`Meter.verdict`):

- *cpu*: seconds the worker's processes ran (user and system, their reaped children included). The
  code is over its budget when this reaches it: an endless loop, or far too slow.
- *waiting*: seconds its threads were runnable but waited for a core (the run queue, from
  schedstat). That is the machine's load, never the code's.
- *idle*: the rest of the wall clock. The code waited for something else: a sleep, a lock, a pipe.
  It is over its budget when idle time alone reaches it.

When the wall clock reaches the backstop before either, the machine, not the code, was too slow:
the grader was overloaded, and the call is graded again later, never counted against the student.

The processes are the worker's descendants (bubblewrap runs them in a session of their own) and the
members of its pids cgroup where there is one (a process cannot leave it). Read from /proc (Linux).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Usage:
    cpu: float = 0.0
    waiting: float = 0.0

    def __sub__(self, other: "Usage") -> "Usage":
        return Usage(self.cpu - other.cpu, self.waiting - other.waiting)


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


def _waiting(pid: int) -> float:
    total = 0
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return 0.0
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


def usage(pids: set[int]) -> Usage:
    """CPU and run-queue seconds of these processes (those gone by now are left out; their parents'
    reaped-children times hold what they ran)."""
    cpu = waiting = 0.0
    for pid in pids:
        fields = _stat(pid)
        if fields is None:
            continue
        cpu += sum(int(v) for v in fields[11:15]) / TICKS  # utime stime cutime cstime
        waiting += _waiting(pid)
    return Usage(cpu, waiting)


def backstop(budget: float) -> float:
    """The wall-clock seconds after which a call under its CPU budget is the grader's overload: generous,
    since a loaded machine can stretch a call several times over."""
    return max(4 * budget, budget + 60.0)


class Meter:
    """One call's use of the machine, from its start; `processes` lists the worker's pids when asked (a
    scan of /proc, so it is asked only while a call runs long). `first`: the pids at the start, where
    the caller knows them (an idle worker starts nothing between two calls)."""

    def __init__(self, processes, budget: float, first: set[int] | None = None) -> None:
        self.processes, self.budget = processes, budget
        self.started = time.monotonic()
        self.base = usage(first if first is not None else processes())
        self.used = Usage()
        self.wall = 0.0
        self.last: str | None = None  # the verdict that stopped the call, if one did

    def read(self) -> Usage:
        self.wall = time.monotonic() - self.started
        used = usage(self.processes()) - self.base  # processes gone since the start read as less
        self.used = Usage(max(0.0, used.cpu), max(0.0, used.waiting))
        return self.used

    @property
    def idle(self) -> float:
        return max(0.0, self.wall - self.used.cpu - self.used.waiting)

    @property
    def charged(self) -> float:
        """What the call cost the submission: its CPU time and its idle time, not its wait for a core."""
        return min(self.wall, self.used.cpu + self.idle)

    def verdict(self) -> str | None:
        """None while the call may go on; "cpu" or "idle" when the code used up its budget; "overloaded"
        when the backstop came first."""
        self.read()
        if self.used.cpu >= self.budget:
            self.last = "cpu"
        elif self.idle >= self.budget:
            self.last = "idle"
        elif self.wall >= backstop(self.budget):
            self.last = "overloaded"
        return self.last
