"""A worker that stands for a GPU grader's worker on a machine without a GPU: the grader's GPU rehearsal.

The grader's runner, told to rehearse (LLMSYS_REHEARSE_GPU=1, autograder.grading.runner.rehearsing), takes
every branch it takes on a GPU, and starts its GPU workers with VARIABLE set. Their Triton still interprets
and their device is the CPU (there is no CUDA: kernels.device decides so as everywhere), but they stand for a
GPU worker in the two ways the grader's GPU branches exist for (docs/gpus.md, "Rehearsing GPU grading on a
CPU"):

- CUDA is in reach. A worker on a GPU has asked CUDA for its devices when it started (importing `kernels`
  calls kernels.device.has_cuda), and a child forked from such a process cannot use CUDA: "Cannot
  re-initialize CUDA in forked subprocess". So a stand-in counts as such a process from its start
  (`start`): kernels.crosscompile.run_request sees CUDA in reach (`cuda_in_reach`) and compiles in a new
  process, and a compile in a child forked from it fails as it would on the GPU (`refuse_a_forked_compile`).
- Nothing to count. A compiled kernel's programs cannot be observed one by one, so a scenario that counts
  under the interpreter (marked `interpreted`) finds nothing in a GPU worker: kernels.device.interpreted()
  answers False while such a scenario runs in a stand-in (`counting`), to the scenario's code and the
  submission's alike, as in a compiling worker. Code that then takes its GPU path (an autotuner over
  several configs) fails there, under the interpreter, where on a GPU it would run and count nothing:
  either way the check earns nothing in the GPU worker.

Nothing here acts unless the grader set VARIABLE in the worker's environment.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

VARIABLE = "LLMSYS_GPU_STAND_IN"
BAD_FORK = ("Cannot re-initialize CUDA in forked subprocess (the GPU rehearsal's stand-in: this process was "
            "forked from a worker that stands for one on a GPU, where CUDA had been started; compile in a new "
            "process, as kernels.crosscompile.run_request does where CUDA is in reach)")

_started_in: int | None = None  # the pid of the worker that stands for a GPU worker, once it has started


def start() -> bool:
    """Where the grader asked for it (VARIABLE in this process's environment, taken out of it), this process
    stands for a GPU worker from now on, as one that has started CUDA; True where it does."""
    global _started_in
    if os.environ.pop(VARIABLE, "") != "1":
        return False
    _started_in = os.getpid()
    return True


def standing_in() -> bool:
    """True in the process that started as a GPU worker's stand-in (not in a child forked from it)."""
    return _started_in == os.getpid()


def cuda_in_reach() -> bool:
    """Where this process stands for a GPU worker, it has started CUDA, as such a worker would have."""
    return standing_in()


def refuse_a_forked_compile() -> None:
    """Raise CUDA's error in a child forked from a stand-in, as a compile there would on a GPU machine."""
    if _started_in is not None and _started_in != os.getpid():
        raise RuntimeError(BAD_FORK)


@contextlib.contextmanager
def counting(scenario: Any) -> Iterator[None]:
    """Around a scenario in the worker: where this process stands for a GPU worker and the scenario counts under
    the interpreter (`interpreted`), kernels.device.interpreted() answers False inside, as on a GPU; otherwise
    nothing changes."""
    if not (standing_in() and getattr(scenario, "interpreted", False) is True):
        yield
        return
    from kernels import device

    real = device.interpreted
    device.interpreted = lambda: False
    try:
        yield
    finally:
        device.interpreted = real
