"""kernels.interpreter_calls: under Triton's interpreter, a call of a @triton.jit function within a launch does not
scan triton.language again once that launch has patched it; what the kernel computes, and what Triton restores at
the launch's end, are unchanged."""

import importlib.util
import inspect
from pathlib import Path

import pytest
import torch

from kernels.device import interpreted

pytestmark = [pytest.mark.triton,
              pytest.mark.skipif(not interpreted(), reason="only Triton's CPU interpreter patches triton.language")]

# A kernel that calls its own helper CALLS times per program (the helper's module holds triton.language) and
# tl.sum once (a @triton.jit function of triton.language.standard, whose module holds triton.language.core).
SOURCE = '''\
import kernels  # noqa: F401
import torch
import triton
import triton.language as tl


@triton.jit
def _twice_plus(x, k):
    return x * 2.0 + k


@triton.jit
def helpers_kernel(X, Y, TOTAL, n, CALLS: tl.constexpr, FAIL: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(X + offsets, mask=mask, other=0.0)
    for k in tl.static_range(CALLS):
        x = _twice_plus(x, k)
    if FAIL:
        x = tl.reshape(x, (2 * BLOCK,))  # twice the block's values: refused while the program runs
    tl.store(Y + offsets, x, mask=mask)
    tl.store(TOTAL + pid, tl.sum(tl.where(mask, x, 0.0), axis=0))


def run(x, calls, fail=False, block=16):
    programs = triton.cdiv(x.numel(), block)
    y, total = torch.empty_like(x), torch.empty(programs, dtype=x.dtype)
    helpers_kernel[(programs,)](x, y, total, x.numel(), CALLS=calls, FAIL=fail, BLOCK=block)
    return y, total
'''


def expected(x: torch.Tensor, calls: int, block: int = 16):
    y = x.clone()
    for k in range(calls):
        y = y * 2.0 + k
    padded = torch.nn.functional.pad(y, (0, -y.numel() % block))
    return y, padded.view(-1, block).sum(dim=1)


@pytest.fixture
def kernel(tmp_path: Path):
    path = tmp_path / "helpers.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("helpers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def scans(monkeypatch):
    """How many times inspect.getmembers scans a module of triton.language: what Triton's `_patch_lang` does for each
    module it patches."""
    import triton.language as tl

    modules = {id(m) for m in (tl, tl.core, tl.math, tl.tensor, tl.core.tensor_descriptor_base)}
    counted = []
    original = inspect.getmembers

    def counting(obj, *args, **kwargs):
        if id(obj) in modules:
            counted.append(obj)
        return original(obj, *args, **kwargs)

    monkeypatch.setattr(inspect, "getmembers", counting)
    return counted


def test_the_scans_of_a_launch_do_not_grow_with_its_helper_calls_and_the_results_are_the_same(kernel, scans):
    x = torch.linspace(-3, 3, 70)
    kernel.run(x, 1)  # a jit function's first call adds triton.language to its module (Triton's rewrite): done here
    counts = {}
    for calls in (2, 8):
        scans.clear()
        y, total = kernel.run(x, calls)
        counts[calls] = len(scans)
        want_y, want_total = expected(x, calls)
        assert torch.allclose(y, want_y) and torch.allclose(total, want_total, rtol=1e-5), calls
    # 5 programs, each calling the helper 2 or 8 times and tl.sum once. Triton alone scans at every call: 4 modules
    # for each call of the helper, 7 for each of tl.sum. Here: the launch's own 4, and the 7 of the first tl.sum
    # (which holds triton.language.core, not patched by the launch), once per launch.
    assert counts[8] == counts[2] <= 11, counts


def test_triton_language_is_restored_at_the_launchs_end_even_when_the_launch_fails(kernel):
    import triton.language as tl
    from triton.runtime import interpreter

    from kernels import interpreter_calls

    assert tl.core.is_builtin(tl.load) and tl.core.is_builtin(tl.tensor.__add__)
    from triton.runtime.errors import InterpreterError

    with pytest.raises(InterpreterError):
        kernel.run(torch.ones(20), 3, fail=True)
    assert tl.core.is_builtin(tl.load) and tl.core.is_builtin(tl.tensor.__add__)
    assert getattr(interpreter_calls._STATE, "patched", None) is None  # no launch is in progress any more
    y, total = kernel.run(torch.ones(20), 3)  # the next launch patches and computes as the first did
    assert torch.allclose(y, expected(torch.ones(20), 3)[0])
    assert getattr(interpreter._patch_lang, "_skips_what_is_patched", False)


def test_installing_twice_changes_nothing():
    from triton.runtime import interpreter

    from kernels import interpreter_calls

    before = (interpreter._patch_lang, interpreter.GridExecutor.__call__)
    assert interpreter_calls.install()
    assert (interpreter._patch_lang, interpreter.GridExecutor.__call__) == before
