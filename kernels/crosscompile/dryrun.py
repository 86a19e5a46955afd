"""The dry run: host code run as on a GPU, on fake CUDA tensors, with each Triton launch recorded, not run.

Tensors are torch fake tensors on "cuda" (FakeTensorMode: no memory and no device) and each kernel
launch is recorded by kernels.launches (dry run), with Triton's specialisation of its arguments, so the
types, constexprs, alignments and tile sizes are those the code would really launch on a GPU. The
launches must go through Triton's compiling launcher, not its interpreter: require_compiler says so
where they would not.

Host code that asks whether it is on a GPU gets the GPU's answer (as_on_a_gpu): x.is_cuda and
x.device.type are "cuda" on fake CUDA tensors; torch.cuda.is_available() (so kernels.device.has_cuda()
and default_device()), device_count(), current_device(), get_device_capability(), get_device_name(),
get_device_properties() and is_bf16_supported() are patched to answer as the build target's GPU does
(sm_90: an H100, capability (9, 0), 132 SMs; gpu_answers); and kernels.device.interpreted() reads
TRITON_INTERPRET, which a compiling process has set to 0. Otherwise a wrapper that picks its path with
torch.cuda.is_available() would take its CPU path here and be built as it never runs on a GPU.

Students also ask at import time (`ON_GPU = torch.cuda.is_available()` at the top of a module), so the
student's modules are imported inside the dry run, anew even where this process imported them before
(imported_anew), and the process's own modules are given back afterwards.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator


def interpreted() -> bool:
    """True when this process's Triton interprets (TRITON_INTERPRET set), so launches would not be compiled."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def require_compiler() -> None:
    if interpreted():
        raise RuntimeError("kernels.crosscompile needs Triton's compiler, but TRITON_INTERPRET is set in this "
                           "process: run `python -m kernels.crosscompile` (it sets TRITON_INTERPRET=0), or call "
                           "run_request() from an interpreted process")


def gpu_launches(call: Callable[[Callable], object], target: str = "sm_90") -> list[dict]:
    """The launches `call(make)` makes as on a GPU of `target`; `make(*shape, dtype=...)` gives fake CUDA tensors.

    Nothing runs on a device and no memory is allocated: tensors are torch fake tensors on "cuda", and
    each kernel launch is recorded (kernels.launches, dry run) instead of run. torch.cuda answers as
    `target`'s GPU (as_on_a_gpu); `call` should import the modules it runs itself, so that they are
    imported as on that GPU.
    """
    import torch

    from kernels.launches import record_launches

    def make(*shape, dtype=torch.bfloat16):
        return torch.empty(*shape, dtype=dtype, device="cuda")

    with as_on_a_gpu(target), record_launches(dry_run=True) as record:
        call(make)
    return record.launches


@dataclass(frozen=True)
class DeviceProperties:
    """What torch.cuda.get_device_properties() answers in the dry run: the fields host code reads to size
    a grid or choose tiles, for the build target's GPU (kernels.hardware). total_memory is the vendor's
    decimal capacity, a little more or less than a real device reports."""

    name: str
    major: int
    minor: int
    multi_processor_count: int
    total_memory: int
    warp_size: int = 32
    max_threads_per_block: int = 1024
    shared_memory_per_block_optin: int = 0
    regs_per_multiprocessor: int = 64 * 1024
    is_integrated: int = 0


def gpu_answers(target: str = "sm_90") -> dict[str, Callable]:
    """{name: function} for torch.cuda inside as_on_a_gpu(target): one GPU, the course's GPU of that
    architecture (kernels.hardware.ARCHITECTURE_GPUS: an H100 for sm_90, an A100 for sm_80, a B200 for
    sm_100), with its compute capability (sm_90: (9, 0)), and nothing to wait for or to switch to."""
    from kernels.hardware import (ARCHITECTURE_GPUS, MAX_THREADS_PER_BLOCK, REGISTERS_PER_BLOCK,
                                  SHARED_MEMORY_PER_BLOCK, TARGETS, gpu)

    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; targets {list(TARGETS)}")
    major, minor = divmod(TARGETS[target], 10)
    card = gpu(ARCHITECTURE_GPUS[target].split(",")[0].strip())
    properties = DeviceProperties(name=f"NVIDIA {card.name}", major=major, minor=minor,
                                  multi_processor_count=card.num_sms, total_memory=card.hbm_bytes,
                                  max_threads_per_block=MAX_THREADS_PER_BLOCK,
                                  shared_memory_per_block_optin=SHARED_MEMORY_PER_BLOCK[target],
                                  regs_per_multiprocessor=REGISTERS_PER_BLOCK)

    class device:  # torch.cuda.device(d) as a context: there is one GPU, nothing to switch
        def __init__(self, device=None) -> None:
            pass

        def __enter__(self) -> None:
            pass

        def __exit__(self, *exc) -> bool:
            return False

    return {"is_available": lambda: True, "device_count": lambda: 1, "current_device": lambda: 0,
            "set_device": lambda device: None, "device": device, "synchronize": lambda device=None: None,
            "get_device_capability": lambda device=None: (major, minor),
            "get_device_name": lambda device=None: properties.name,
            "get_device_properties": lambda device=None: properties,
            "is_bf16_supported": lambda including_emulation=True: major >= 8}


@contextmanager
def as_on_a_gpu(target: str = "sm_90") -> Iterator[None]:
    """Fake CUDA tensors (FakeTensorMode), and torch.cuda answering as on a machine with one GPU of
    `target` (gpu_answers); torch.cuda's own functions are put back on exit, also after an error."""
    require_compiler()
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    answers = gpu_answers(target)
    missing = object()
    saved = {name: getattr(torch.cuda, name, missing) for name in answers}
    try:
        for name, answer in answers.items():
            setattr(torch.cuda, name, answer)
        with FakeTensorMode(allow_non_fake_inputs=True):
            yield
    finally:
        for name, original in saved.items():
            if original is missing:
                delattr(torch.cuda, name)
            else:
                setattr(torch.cuda, name, original)


# Top-level packages that the dry run itself is made of: of these, imported_anew imports only the module
# named anew, never the whole package (a second copy of kernels.launches would not see the recorder).
_OWN_PACKAGES = ("kernels", "torch", "triton")


@contextmanager
def imported_anew(*modules: str) -> Iterator[None]:
    """Inside it, each of `modules` is imported anew at its next import, with the rest of its top-level
    package (a student's module reads its sibling's flags): so that module-level code such as `ON_GPU =
    torch.cuda.is_available()` runs as on a GPU, inside as_on_a_gpu, even where this process imported the
    module before. On exit, also after an error, sys.modules and the packages' attributes hold this process's
    modules again, and those first imported inside are forgotten: so hold it over the builds as well, which
    find each kernel by its module's name (compiler.jit_function), and would otherwise import it as on a CPU."""

    def ours(name: str) -> bool:
        for module in modules:
            top = module.split(".")[0]
            if name == module or (top not in _OWN_PACKAGES and (name == top or name.startswith(top + "."))):
                return True
        return False

    saved = {name: module for name, module in list(sys.modules.items()) if ours(name)}
    for name in saved:
        del sys.modules[name]
    try:
        yield
    finally:
        for name in [name for name in list(sys.modules) if ours(name)] + list(saved):
            sys.modules.pop(name, None)
            parent, _, child = name.rpartition(".")
            package = sys.modules.get(parent) if parent else None
            if package is None or ours(parent):
                continue  # a package given back below keeps its own attributes
            if name in saved:
                setattr(package, child, saved[name])
            elif getattr(package, child, None) is not None:
                delattr(package, child)
        sys.modules.update(saved)


def unique_launches(launches: list[dict]) -> list[dict]:
    """Launches with the same kernel, types, constexprs and options counted once, in first-seen order."""
    seen, kept = set(), []
    for launch in launches:
        key = json.dumps(launch, sort_keys=True)
        if key not in seen:
            seen.add(key)
            kept.append(launch)
    return kept


class AutogradContext:
    """What FlashAttentionTriton's forward and backward use of autograd's ctx. Autograd itself cannot
    run on fake CUDA tensors in a CPU build of torch (it aborts), so forward and backward are called
    directly, in the order autograd would call them."""

    needs_input_grad = (True, True, True, False)

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


def torch_dtype(name: str):
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}[name]
