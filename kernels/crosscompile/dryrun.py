"""The dry run: host code run as on a GPU, on fake CUDA tensors, with each Triton launch recorded, not run.

Tensors are torch fake tensors on "cuda" (FakeTensorMode: no memory and no device) and each kernel
launch is recorded by kernels.launches (dry run), with Triton's specialisation of its arguments, so the
types, constexprs, alignments and tile sizes are those the code would really launch on a GPU. The
launches must go through Triton's compiling launcher, not its interpreter: require_compiler says so
where they would not.

Host code that asks whether it is on a GPU gets the GPU's answer (as_on_a_gpu): x.is_cuda and
x.device.type are "cuda" on fake CUDA tensors, torch.cuda.is_available() (so kernels.device.has_cuda()
and default_device()) is patched to say yes, and kernels.device.interpreted() reads TRITON_INTERPRET,
which a compiling process has set to 0. Otherwise a wrapper that picks its path with
torch.cuda.is_available() would take its CPU path here and be built as it never runs on a GPU.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from typing import Callable, Iterator


def interpreted() -> bool:
    """True when this process's Triton interprets (TRITON_INTERPRET set), so launches would not be compiled."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def require_compiler() -> None:
    if interpreted():
        raise RuntimeError("kernels.crosscompile needs Triton's compiler, but TRITON_INTERPRET is set in this "
                           "process: run `python -m kernels.crosscompile` (it sets TRITON_INTERPRET=0), or call "
                           "run_request() from an interpreted process")


def gpu_launches(call: Callable[[Callable], object]) -> list[dict]:
    """The launches `call(make)` makes as on a GPU; `make(*shape, dtype=...)` gives fake CUDA tensors.

    Nothing runs on a device and no memory is allocated: tensors are torch fake tensors on "cuda", and
    each kernel launch is recorded (kernels.launches, dry run) instead of run.
    """
    import torch

    from kernels.launches import record_launches

    def make(*shape, dtype=torch.bfloat16):
        return torch.empty(*shape, dtype=dtype, device="cuda")

    with as_on_a_gpu(), record_launches(dry_run=True) as record:
        call(make)
    return record.launches


# What torch.cuda answers inside as_on_a_gpu(): one GPU, and nothing to wait for.
_GPU_ANSWERS = {"is_available": lambda: True, "device_count": lambda: 1, "synchronize": lambda device=None: None}


@contextmanager
def as_on_a_gpu() -> Iterator[None]:
    """Fake CUDA tensors (FakeTensorMode), and torch.cuda answering as on a machine with one GPU
    (_GPU_ANSWERS); torch.cuda's own functions are put back on exit, also after an error."""
    require_compiler()
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    saved = {name: getattr(torch.cuda, name) for name in _GPU_ANSWERS}
    try:
        for name, answer in _GPU_ANSWERS.items():
            setattr(torch.cuda, name, answer)
        with FakeTensorMode(allow_non_fake_inputs=True):
            yield
    finally:
        for name, original in saved.items():
            setattr(torch.cuda, name, original)


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
