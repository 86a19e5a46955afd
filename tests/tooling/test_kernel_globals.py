"""kernels.kernel_globals: kernel code reads only the globals a GPU build accepts, and a CPU run is held to
that rule at each kernel's first launch (the interpreter alone would run a plain-number global)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels.device import interpreted

pytestmark = pytest.mark.triton

ROOT = Path(__file__).resolve().parents[2]

# A kernel that reads SCALE through a @triton.jit helper; SCALE's definition is filled in by each test.
SOURCE = '''\
import math

import kernels  # noqa: F401
import torch
import triton
import triton.language as tl

SCALE = {scale}
FP32 = tl.float32
{helper}


@triton.jit
def scale_kernel(X, Y, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(X + offsets, mask=offsets < n).to(FP32)
    tl.store(Y + offsets, _times_scale(x) + 0.0 * math.pi, mask=offsets < n)


def scale(x):
    y = torch.empty_like(x)
    scale_kernel[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return y
'''
JIT_HELPER = "\n\n@triton.jit\ndef _times_scale(x):\n    return x * SCALE\n"
PLAIN_HELPER = "\n\ndef _times_scale(x):\n    return x * SCALE\n"


def module_with(tmp_path: Path, name: str, scale: str, helper: str = JIT_HELPER):
    path = tmp_path / f"{name}.py"
    path.write_text(SOURCE.format(scale=scale, helper=helper))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line_of(module, text: str) -> int:
    return Path(module.__file__).read_text().splitlines().index(text) + 1


needs_interpreter = pytest.mark.skipif(not interpreted(), reason="the check holds the CPU interpreter to the GPU's "
                                                                 "rule; on a GPU, Triton's compiler enforces it")


@needs_interpreter
def test_a_plain_number_read_by_a_kernel_fails_every_launch_with_the_global_the_kernel_the_line_and_the_fix(tmp_path):
    from kernels.kernel_globals import KernelGlobalError

    module = module_with(tmp_path, "plain_scale", "1.5")
    for _ in range(2):  # not only the first launch: until it is fixed
        with pytest.raises(KernelGlobalError) as error:
            module.scale(torch.ones(8))
        message = str(error.value)
        assert f"plain_scale.py:{line_of(module, '    return x * SCALE')}:" in message
        assert "_times_scale (called by the kernel scale_kernel) reads the global SCALE" in message
        assert "Cannot access global variable SCALE" in message
        assert "`SCALE = tl.constexpr(1.5)`" in message and "pass it to the kernel as an argument" in message


@needs_interpreter
def test_a_constexpr_global_runs_and_gives_its_value(tmp_path):
    module = module_with(tmp_path, "constexpr_scale", "tl.constexpr(1.5)")
    assert torch.equal(module.scale(torch.ones(8)), torch.full((8,), 1.5))


def test_a_kernel_calling_a_python_function_is_told_to_make_it_a_triton_jit_function(tmp_path):
    from kernels.kernel_globals import problems

    module = module_with(tmp_path, "python_helper", "tl.constexpr(1.5)", PLAIN_HELPER)
    found = problems(module.scale_kernel.fn)
    assert len(found) == 1 and "reads the global _times_scale" in found[0]
    assert "not a @triton.jit function" in found[0] and "Decorate _times_scale with @triton.jit" in found[0]


def test_modules_dtypes_jit_functions_and_constexprs_are_allowed(tmp_path):
    from kernels.kernel_globals import problems

    module = module_with(tmp_path, "allowed", "tl.constexpr(1.5)")
    assert problems(module.scale_kernel.fn) == [] and problems(module._times_scale.fn) == []


# The given kernels of the reference solutions and of kernels/, imported from solutions/ in a process of their own
# (the tests of this repository import assignments/), and asked what they read.
GIVEN = """
import json, sys, types
from pathlib import Path
from kernels import impl
impl.activate(impl.resolve("solutions", Path(sys.argv[1])))
import importlib
from kernels.kernel_globals import problems
found, kernels_seen = [], 0
for name in ("flash_attention.flash_triton", "gpu_kernels.elementwise", "gpu_kernels.softmax", "gpu_kernels.matmul",
             "kernels.demos"):
    module = importlib.import_module(name)
    for value in vars(module).values():
        fn = value
        while not isinstance(fn, types.FunctionType) and hasattr(fn, "fn"):
            fn = fn.fn
        if fn is not value and isinstance(fn, types.FunctionType) and fn.__module__ == name:
            kernels_seen += 1
            found += problems(fn)
print(json.dumps({"kernels": kernels_seen, "problems": found}))
"""


def test_every_kernel_of_the_solutions_and_of_kernels_reads_only_globals_a_gpu_build_accepts():
    """The given LOG2E and LN2 are tl.constexpr, and so is every module-level constant a kernel reads."""
    done = subprocess.run([sys.executable, "-c", GIVEN, str(ROOT)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["kernels"] >= 15 and got["problems"] == []


# The rule is the GPU compiler's: Triton's own code generator, for sm_90, with no GPU, refuses the plain number
# and accepts the constexpr; the check says the same of both.
COMPILE = """
import importlib.util, json, sys
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile as build
from kernels.kernel_globals import problems
verdicts = {}
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = ASTSource(fn=module.scale_kernel, signature={"X": "*fp32", "Y": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                       constexprs={"BLOCK": 16})
    try:
        build(source, target=GPUTarget("cuda", 90, 32))
        gpu = "built"
    except Exception as exc:  # a CompilationError, the compiler's own message in its causes
        gpu, cause = [], exc
        while cause is not None:
            gpu.append(str(cause))
            cause = cause.__cause__
        gpu = " ".join(gpu)
    verdicts[module.__name__] = {"gpu": gpu, "check": problems(module._times_scale.fn)}
print(json.dumps(verdicts))
"""


def test_the_gpu_compiler_refuses_what_the_check_refuses_and_builds_what_it_allows(tmp_path):
    for name, scale in (("plain", "1.5"), ("constant", "tl.constexpr(1.5)")):
        (tmp_path / f"{name}.py").write_text(SOURCE.format(scale=scale, helper=JIT_HELPER))
    done = subprocess.run([sys.executable, "-c", COMPILE, str(tmp_path / "plain.py"), str(tmp_path / "constant.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "TRITON_INTERPRET": "0", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert "Cannot access global variable SCALE" in got["plain"]["gpu"] and len(got["plain"]["check"]) == 1
    assert got["constant"] == {"gpu": "built", "check": []}


REIMPORTED = """
import sys
import kernels  # its finder waits for Triton's interpreter
for name in [name for name in sys.modules if name == "kernels" or name.startswith("kernels.")]:
    del sys.modules[name]
import kernels  # a new module, a new class of finder: as in a pytest run forked from a process that imported it
import triton
from triton.runtime.interpreter import InterpretedFunction
print(sum(getattr(f, "after_triton_interpreter", False) for f in sys.meta_path),
      getattr(InterpretedFunction.run, "_checks_globals", False),
      InterpretedFunction.run.__globals__ is sys.modules["kernels.kernel_globals"].__dict__,
      getattr(sys.modules["triton.runtime.interpreter"]._patch_lang, "_skips_what_is_patched", False))
"""


@needs_interpreter
def test_kernels_imported_twice_before_triton_still_lets_triton_import_and_installs_the_check(tmp_path):
    done = subprocess.run([sys.executable, "-c", REIMPORTED], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    # one finder, the check of the module imported last, and the calls of jit functions that patch nothing again
    assert done.stdout.split() == ["1", "True", "True", "True"]
