"""Autotuned kernels launched at their first config: what a GPU grader's worker does.

On a GPU, `triton.autotune` compiles and times every config at every new key (head dim, tiles, causality,
dtype...) before the first launch: most of the compilations a grading of flash_attention triggers, and most
of its time (`make bench-grader` counts them, at every config and at one).
Grading asks whether a kernel is right and how it is built, never which config is fastest (autotuning is
for the benchmark): so a GPU worker launches each autotuned kernel at the first config of its list, the
student's own choice, without timing the others.

Only the launch changes. `Autotuner.configs` keeps every config, so what reads them (the launch recorder
of kernels.launches, the compile checks and `make gpu-compile` in kernels.crosscompile) sees the list the
student wrote; and with one config Triton's own `Autotuner.run` takes its path without timing, the same in
every Triton version the course supports. The worker calls `launch_first_config` before any submission code is imported, where the
grader asks for it (VARIABLE in the worker's environment); a student's own `make test` autotunes as usual.
"""

from __future__ import annotations

import importlib.abc
import os
import sys

VARIABLE = "LLMSYS_AUTOTUNE_FIRST_CONFIG"
AUTOTUNER = "triton.runtime.autotuner"

_patched: dict = {}


def launch_first_config() -> bool:
    """From now on, every autotuned kernel of this process launches at its first config: Autotuner.run sees
    that config alone, and every config again once the launch is done. Triton is not imported for it: where
    it is not yet, Autotuner is patched as its module is first imported (a worker that has not imported
    Triton forks its compile checks, kernels.crosscompile.request.run_request). True once asked."""
    module = sys.modules.get(AUTOTUNER)
    if module is not None:
        _patch(module.Autotuner)
    elif not any(isinstance(finder, _OnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OnImport())
    return True


def _patch(autotuner: type) -> None:
    if autotuner in _patched:
        return
    original = autotuner.__dict__["run"]

    def run(self, *args, **kwargs):
        configs = self.configs
        if len(configs) <= 1:
            return original(self, *args, **kwargs)
        self.configs = configs[:1]
        try:
            return original(self, *args, **kwargs)
        finally:
            self.configs = configs

    run.__wrapped__ = original
    autotuner.run = run
    _patched[autotuner] = original


class _OnImport(importlib.abc.MetaPathFinder):
    """Finds Triton's autotuner module as the other finders do, and patches its Autotuner once it has run."""

    def find_spec(self, name, path, target=None):
        if name != AUTOTUNER:
            return None
        sys.meta_path.remove(self)  # once: the module is imported once
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None:
                spec.loader = _Patching(spec.loader)
                return spec
        return None


class _Patching(importlib.abc.Loader):
    def __init__(self, loader) -> None:
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        _patch(module.Autotuner)

    def __getattr__(self, name):  # get_source, get_filename...: the module's loader answers as ever
        return getattr(self.loader, name)


def requested() -> bool:
    """Whether the grader asked this process to launch at first configs (VARIABLE, taken out of the
    environment so that no process this one starts inherits it)."""
    return os.environ.pop(VARIABLE, "") == "1"


def restore() -> None:
    """Undo launch_first_config (tests)."""
    for cls, original in _patched.items():
        cls.run = original
    _patched.clear()
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _OnImport)]
