"""Device and Triton-mode selection: the one place that decides whether Triton is interpreted.

Why this exists: Triton reads TRITON_INTERPRET once, when it is first imported, and entering *any*
TorchDispatchMode makes torch import Triton. If that happens before the variable is set, every later
@triton.jit kernel on a CPU tensor fails ("Cannot call @triton.jit'd outside of the scope of a kernel").
So every entry point (the root conftest, the grader's worker, the benchmark scripts) calls
`configure_triton()` before anything else touches torch's dispatch machinery.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings

import torch

_INTERPRET = "TRITON_INTERPRET"


def has_cuda() -> bool:
    """True when a CUDA device is usable. Does not import Triton."""
    return torch.cuda.is_available()


def triton_available() -> bool:
    """True when the `triton` package can be imported (Linux wheels only: not macOS or Windows)."""
    return importlib.util.find_spec("triton") is not None


def configure_triton() -> bool:
    """Select Triton's mode for this process and return True when Triton runs interpreted.

    Without CUDA, sets TRITON_INTERPRET=1 (unless the caller already set the variable). Call it before
    Triton is imported; if Triton was imported first in the wrong mode, a warning says so.
    """
    if _INTERPRET not in os.environ and not has_cuda():
        if "triton" in sys.modules:
            warnings.warn(
                "triton was imported before kernels.device.configure_triton(); Triton kernels on CPU "
                "tensors will fail. Import kernels (or call configure_triton()) first.",
                RuntimeWarning,
                stacklevel=2,
            )
        os.environ[_INTERPRET] = "1"
    return interpreted()


def interpreted() -> bool:
    """True when Triton runs (or will run) under its CPU interpreter."""
    return os.environ.get(_INTERPRET, "0") not in ("", "0")


def interpreter_device(device: str | torch.device) -> str:
    """Where a scenario that counts under Triton's interpreter puts its tensors: the CPU where this process
    interprets (the grader runs such scenarios in an interpreting worker, without the GPU, even on a GPU
    machine, whatever device the test drew), else `device` itself (a student's own run on a GPU, where the
    scenario finds nothing to count)."""
    return "cpu" if interpreted() else str(device)


def default_device() -> torch.device:
    """The device the tests and benchmarks use: the GPU when there is one, else the CPU."""
    return torch.device("cuda" if has_cuda() else "cpu")


def triton_skip_reason() -> str | None:
    """Why Triton tests cannot run here, or None when they can."""
    if not triton_available():
        return (
            "triton is not installed: its wheels exist for Linux only (not macOS or Windows); "
            "run these tests on Linux or in the course's container"
        )
    return None


def dispatch_modes_without_dynamo() -> None:
    """Let every TorchDispatchMode class made from now on dispatch without importing torch._dynamo.

    torch wraps each such class's __torch_dispatch__ so that Dynamo never traces into it, and that wrapper
    imports torch._dynamo (with Triton and sympy: about 1.4 CPU seconds) at the class's first dispatch. A
    process that compiles nothing with torch.compile has nothing for Dynamo to skip: this marks each new
    class's method as its own disabled version, so that the wrapper calls it straight away. The grader's
    sandboxed worker does so before any scenario module or student code defines a mode (a FlopCounter, the
    recorders of kernels/), and saves those seconds at every start. No-op where torch has no such wrapper.
    """
    import functools

    original = getattr(torch, "_disable_dynamo", None)
    if original is None or getattr(original, "without_dynamo", False):
        return

    def without_dynamo(fn=None, recursive=True):
        if fn is None:
            return functools.partial(without_dynamo, recursive=recursive)
        fn.__dynamo_disable = fn  # what the wrapper looks up before it imports torch._dynamo
        return original(fn, recursive)

    without_dynamo.without_dynamo = True
    torch._disable_dynamo = without_dynamo


def warm_dispatch() -> None:
    """Enter a pass-through TorchDispatchMode once, so that torch imports its dispatch machinery now.

    The first entry into any TorchDispatchMode imports torch._dynamo (and with it Triton): about a
    second and a half of CPU. The grader's runner, which will enter one, pays it at start-up instead of
    inside the first FlopCounter or memory tracker; the sandboxed worker avoids it altogether
    (dispatch_modes_without_dynamo). Call configure_triton() first (importing `kernels` does).
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    class _PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with _PassThrough():
        torch.ones(1) + 1
