"""Kernel code reads only the globals a GPU compiler accepts: the CPU interpreter is held to the same rule.

Triton's GPU compiler looks up every global name a @triton.jit function reads in the function's module
and refuses one that is not known at compile time (triton/compiler/code_generator.py, `global_lookup`;
the same rule in Triton 3.6 and the locked 3.7.1): a plain module-level number such as

    LOG2E = 1.4426950408889634
    ... tl.exp2(s * LOG2E) ...         # inside a @triton.jit function

fails the GPU build with "Cannot access global variable LOG2E", while the CPU interpreter runs it
without a word. What a kernel may read as a global: a `tl.constexpr` (`LOG2E = tl.constexpr(1.44...)`;
an annotation alone, `LOG2E: tl.constexpr = 1.44`, is not one), a module (`tl`, `math`), another
@triton.jit function, a Triton dtype (`tl.float32`), a name of triton.language, None, a namedtuple.

So that a CPU run meets the rule too, `install()` wraps the interpreter's launch
(`InterpretedFunction.run`, `run(self, *args, grid, warmup, **kwargs)` from Triton 3.0 to 3.9): the
first launch of each kernel reads, with `dis`, the globals its code loads, and those of the @triton.jit
functions it calls, and raises `KernelGlobalError` naming the global, the function, the line and the
fix. Each function is checked once. Importing `kernels` installs it in every process that interprets
Triton, as soon as Triton's interpreter is imported (kernels/__init__.py), with kernels.interpreter_calls.
"""

from __future__ import annotations

import dis
import importlib.abc
import inspect
import sys
import types
from pathlib import Path


class KernelGlobalError(NameError):
    """A @triton.jit function reads a module-level global that a GPU compiler refuses (see the module)."""


def _allowed(value) -> bool:
    """Triton's rule for a global read in kernel code (code_generator.global_lookup, 3.6 and 3.7.1)."""
    import triton.language as tl
    from triton.runtime.jit import KernelInterface

    return (value is None or isinstance(value, (types.ModuleType, tl.constexpr, tl.dtype, KernelInterface))
            or getattr(value, "__triton_builtin__", False) or getattr(value, "__triton_aggregate__", False)
            or getattr(value, "__module__", "").startswith("triton.language")
            or (isinstance(value, tuple) and hasattr(type(value), "_fields")))


def _loads(code: types.CodeType):
    """(name, line) of every global the code (and the code nested in it) loads."""
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            yield instruction.argval, instruction.positions.lineno if instruction.positions else None
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _loads(constant)


def _where(fn) -> str:
    try:
        path = Path(inspect.getsourcefile(fn) or fn.__code__.co_filename)
    except TypeError:
        return fn.__code__.co_filename
    parts = path.parts
    return "/".join(parts[-2:]) if len(parts) >= 2 else str(path)


def _fix(name: str, value) -> str:
    if callable(value) and not isinstance(value, type):
        return (f"{name} is a Python function, not a @triton.jit function: kernel code calls only @triton.jit "
                f"functions and tl.*. Decorate {name} with @triton.jit, or compute its result in host code and pass "
                "it to the kernel as an argument")
    if isinstance(value, (bool, int, float)):
        return (f"{name} = {value!r} is a plain {type(value).__name__}. Make it a constant the compiler knows, "
                f"`{name} = tl.constexpr({value!r})` (an annotation alone, `{name}: tl.constexpr = {value!r}`, is "
                f"not one; host code computes with it as with a number), or pass it to the kernel as an argument")
    return (f"{name} is a {type(value).__name__}, which kernel code cannot read. Pass what the kernel needs as "
            "arguments (numbers, tensors, tl.constexpr parameters)")


def problems(fn, kernel: str = "") -> list[str]:
    """Why each global that the Python function `fn` (a kernel's `.fn`) reads would fail a GPU build; [] if none.
    `kernel`: the name of the kernel launched, when `fn` is a @triton.jit function it calls."""
    found, seen = [], set()
    role = f"{fn.__name__} (called by the kernel {kernel})" if kernel and kernel != fn.__name__ else \
        f"the kernel {fn.__name__}"
    for name, line in _loads(fn.__code__):
        if name in seen or name not in fn.__globals__:
            continue  # a builtin, or a name that is not defined (Python's own NameError says so)
        seen.add(name)
        value = fn.__globals__[name]
        if not _allowed(value):
            found.append(f"{_where(fn)}:{line}: {role} reads the global {name}, which a GPU build refuses "
                         f"(\"Cannot access global variable {name}\"), though the CPU interpreter would run it. "
                         f"Kernel code reads only globals that are tl.constexpr. {_fix(name, value)}.")
    return found


def _called(fn) -> list:
    """The Python functions of the @triton.jit functions that `fn` reads as globals."""
    called = []
    for name, _ in _loads(fn.__code__):
        inner = getattr(fn.__globals__.get(name), "fn", None)
        if isinstance(inner, types.FunctionType):
            called.append(inner)
    return called


_CLEAN: set[int] = set()  # the code objects of the kernels whose launch found nothing, in this process


def check(kernel) -> None:
    """Raise KernelGlobalError if `kernel` (a @triton.jit function, interpreted or compiled, or an autotuned
    one) or a @triton.jit function it calls reads a global that a GPU build refuses. A kernel found clean
    is not read again in this process."""
    fn = kernel
    while not isinstance(fn, types.FunctionType) and hasattr(fn, "fn"):
        fn = fn.fn
    if not isinstance(fn, types.FunctionType) or id(fn.__code__) in _CLEAN:
        return
    todo, seen, found = [fn], set(), []
    while todo:
        one = todo.pop()
        if id(one.__code__) in seen:
            continue
        seen.add(id(one.__code__))
        found += problems(one, fn.__name__)
        todo += _called(one)
    if found:
        raise KernelGlobalError("\n".join(found))
    _CLEAN.add(id(fn.__code__))


def install() -> bool:
    """Check every interpreted kernel at its launch (see the module); False where Triton has no interpreter
    class to wrap. Installing twice changes nothing."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return False
    run = InterpretedFunction.__dict__.get("run")
    if run is None or getattr(run, "_checks_globals", False):
        return run is not None

    def checked_run(self, *args, **kwargs):
        if not kwargs.get("warmup", False):
            check(self)
        return run(self, *args, **kwargs)

    checked_run._checks_globals = True
    InterpretedFunction.run = checked_run
    return True


def install_all() -> None:
    """What this package puts on Triton's interpreter: the check of kernels' globals (install()) and the calls of
    jit functions that do not patch triton.language again (kernels.interpreter_calls)."""
    from kernels import interpreter_calls

    interpreter_calls.install()
    install()


_INTERPRETER = "triton.runtime.interpreter"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds Triton's interpreter module as the other finders do, and installs the check once it has run.

    It asks every finder but those of its kind: this module imported afresh (its entry removed from sys.modules,
    as a run forked from a warm process does) makes another class of the same name, and two finders that each
    asked the other would never end."""

    after_triton_interpreter = True  # what marks a finder of this kind, whichever import of this module made it

    def find_spec(self, name, path, target=None):
        if name != _INTERPRETER:
            return None
        for finder in sys.meta_path:
            if getattr(finder, "after_triton_interpreter", False):
                continue
            spec = getattr(finder, "find_spec", lambda *a: None)(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                run = spec.loader.exec_module

                def exec_module(module, run=run):
                    run(module)
                    install_all()

                spec.loader.exec_module = exec_module
                return spec
        return None


def install_on_import() -> None:
    """install_all() now if Triton's interpreter is imported already, else as soon as it is; nothing without
    Triton (macOS, Windows)."""
    if _INTERPRETER in sys.modules:
        install_all()
    else:  # one finder of this kind, this import's: its install() is the one the kernels' errors come from
        sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "after_triton_interpreter", False)]
        sys.meta_path.insert(0, _AfterImport())
