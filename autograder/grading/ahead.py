"""The compile checks' builds, started as soon as the tests are collected and run beside them.

A compile check (a suite's test_gpu_compile.py) first checks the kernel's values at a tiny case, then asks
the worker for the kernel's GPU builds (kernels.crosscompile: the student's host code run as on a GPU, every
launched kernel compiled for the course GPU), which take most of a Triton assignment's grading: seconds of
CPU per kernel and dtype. Those builds depend on the submission and the check's arguments only, not on what
the tests did before, so the grader need not wait for the check to start them. Here they start once pytest
has collected the tests: every build the collected compile checks will ask for (each test module says which,
in `builds_ahead(items)`), in one request to a second worker of the same submission, in its own sandbox (its
own bubblewrap, or the first worker's user where a user isolates it) and with the build's own CPU budget, so
that they run on another core while the first worker runs the tests, and cost the student's calls no CPU
time. When a check asks, its answer is taken from here (waiting for it if the builds are still running);
a build that failed here for the machine's or the worker's sake (overloaded, crashed, timed out) is asked
of the first worker instead, as before. The answers are the same either way: each build runs in a fresh
compiler process that imports the submission anew.

A check whose value test fails never asks: its build was done for nothing, off the critical path. The second
worker is stopped once its builds are done (the answers are kept here), or with the first when the tests end,
whatever it is still doing.

Where the grading's workers already share the cores (a grading server without overlap), the builds are `lazy`:
nothing starts until the first check asks, and then the same second worker makes every planned build while the
tests wait. It still saves the submission's worker a new interpreter per check: that worker interprets Triton, so
each of its builds would start a compiler process that imports torch and Triton (kernels.crosscompile.request),
where the builds' worker, forked from the builds' zygote, forks each compile from a process that compiles.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from autograder.grading import buildcache
from autograder.harness.student import scenario_name
from autograder.sandbox.process import Worker

def planned(items: list[pytest.Item]) -> list[tuple[Callable, dict]]:
    """(scenario, keyword arguments) of every build the collected `items` will ask for, from the test modules
    that define `builds_ahead(items)` (given their own items only)."""
    by_module: dict[Any, list[pytest.Item]] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and callable(getattr(module, "builds_ahead", None)):
            by_module.setdefault(module, []).append(item)
    calls = []
    for module, own in by_module.items():
        try:
            calls += list(module.builds_ahead(own))
        except Exception:  # noqa: BLE001  (a module that cannot say: its checks ask for their builds themselves)
            continue
    return calls


def key(name: str, kwargs: dict) -> str:
    """What identifies a scenario call: its name and its arguments, in any order."""
    return repr((name, sorted(kwargs.items())))


class BuildsAhead:
    """The planned builds, asked of a second worker of the submission in a thread of their own.

    Each scenario whose calls are planned names, in its `ahead` attribute, a scenario of the same module that
    takes `calls` (a list of its keyword arguments) and gives their answers in order, every build in one
    compiler process; its `cpu_budget` is the request's."""

    def __init__(self, worker: Worker, calls: list[tuple[Callable, dict]], lazy: bool = False) -> None:
        self.worker = worker
        # lazy: nothing starts until a check asks (a server without overlap, whose workers share the cores);
        # then every planned build is made at once, the tests waiting
        self.lazy = lazy
        self.answers: dict[str, Any] = {}
        self.seconds = 0.0  # wall clock of the builds, from the start to the last answer
        self.given = 0  # the reference's builds copied into its worker's Triton cache (autograder.grading.buildcache)
        self.stopping = False
        self.lock = threading.Lock()  # one stop of the worker at a time: this thread's and the grader's
        self.groups: dict[Callable, list[dict]] = {}
        for scenario, kwargs in calls:
            self.groups.setdefault(scenario, []).append(kwargs)
        self.names = {scenario_name(scenario) for scenario in self.groups}
        self.planned = {key(scenario_name(scenario), kwargs) for scenario, kwargs in calls}
        self.thread = threading.Thread(target=self._run, name="builds-ahead", daemon=True)
        if not lazy:
            self.thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            for scenario, calls in self.groups.items():
                if self.stopping:
                    break
                combined = scenario.ahead
                message = {"op": "scenario", "name": scenario_name(combined), "kwargs": {"calls": calls}}
                try:
                    found = self.worker.request(message, float(combined.cpu_budget))
                except Exception:  # noqa: BLE001  (the check then asks the first worker, as it would have)
                    continue
                if type(found) is list and len(found) == len(calls):
                    name = scenario_name(scenario)
                    self.answers.update((key(name, kwargs), answer) for kwargs, answer in zip(calls, found)
                                        if answer is not None)
        finally:
            self.seconds = time.monotonic() - started
            # Done: stopped now, so that its CPU seconds are counted. (It would die with this thread anyway:
            # bubblewrap's --die-with-parent follows the thread that started it, and this one started it.)
            self._stop_worker()

    def take(self, name: str, kwargs: dict) -> tuple[bool, Any]:
        """(True, the answer) of the call planned as (name, kwargs), once the builds are done; (False, None)
        where it was not planned or its build failed here. Every scenario call of the tests comes here: only a
        planned scenario's arguments (which may hold tensors) are looked at."""
        if name not in self.names:
            return False, None
        wanted = key(name, kwargs)
        if wanted not in self.planned:
            return False, None
        # Lazy, and the first check that asks. No lock: the checks ask, and the grading stops the builds, in the main
        # thread only; a stop may come from a signal handler (runner._end), which would wait forever for a lock that
        # the thread it interrupted holds.
        if self.thread.ident is None and not self.stopping:
            self.thread.start()
        if self.thread.ident is None:
            return False, None
        self.thread.join()
        return (True, self.answers[wanted]) if wanted in self.answers else (False, None)

    def stop(self) -> None:
        """Stop the second worker, and whatever it still builds."""
        self.stopping = True
        try:
            self._stop_worker()
            if self.thread.ident is not None:
                self.thread.join(timeout=60)
        finally:
            self._stop_worker()  # a worker that a failed request started booting meanwhile

    def _stop_worker(self) -> None:
        with self.lock:
            self.worker.stop()


def start(items: list[pytest.Item], first: Worker, scratch: Path, reference_builds: Path | None = None,
          lazy: bool = False) -> BuildsAhead | None:
    """Start the builds the collected `items` will ask for, in a second worker beside `first` (the same library
    and submission, its own scratch folder, given a copy of the reference's builds: autograder.grading.buildcache);
    None when they ask for none. `lazy`: the worker starts, and builds them all, when the first check asks."""
    calls = [(s, kw) for s, kw in planned(items) if getattr(s, "ahead", None) is not None]
    if not calls:
        return None
    account = first.shared_account()
    worker = Worker(first.lib, first.submission, scratch, first.protections, first.gpu, account=account,
                    ran=first.ran, stand_in=first.stand_in,
                    zygote=first.zygote.builds if first.zygote is not None else None)
    scratch.mkdir(parents=True, exist_ok=True)  # a new folder of the stage, which no code of the submission can write
    given = buildcache.seed(reference_builds, scratch, worker.scratch_inside(), own_user=account is not None)
    builds = BuildsAhead(worker, calls, lazy)
    builds.given = given
    return builds
