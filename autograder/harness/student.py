"""The one seam between tests and student code.

Tests never import a student's package. They ask the `student` fixture:

    memory = student.module("resource_accounting.memory")
    assert memory.get_memory_usage(torch.zeros(4, 8)) == 128     # a call
    result = student.run(scenarios.checkpoint_bytes, seed=0)      # a scenario

A *call* sends plain arguments to one function and gets plain data back. A *scenario* is a function
in a `scenarios` module that drives student code (classes, autograd, context managers) on seeded
inputs and returns plain data. Both cross `autograder.model.wire` in both directions, so a test sees the
same values whether the student code runs in this process (`LocalStudent`, a student's `make test`,
with ordinary tracebacks and pdb) or in the grader's sandboxed worker (`autograder.grading.runner`).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from autograder.model import wire

SCENARIO_MODULE_SUFFIX = ".scenarios"


class GraderOverloaded(Exception):
    """A call into student code could not finish because the machine was too busy, not because of the
    code (it stayed under its CPU budget: autograder/sandbox/cputime.py). Never a student failure: the
    submission is graded again, with less running beside it."""


def unwrap_stub(exc: BaseException) -> BaseException:
    """The NotImplementedError of a stub, where Triton's interpreter wrapped it (a stub called inside a
    @triton.jit function raises through `InterpreterError`, its cause); else `exc` itself. A stub counts
    as "not implemented yet" wherever it is first called."""
    seen, link = set(), exc
    while type(exc).__name__ == "InterpreterError" and link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, NotImplementedError):
            return link
        link = link.__cause__
    return exc


class NotComputedByKernel(AssertionError):
    """A Triton task's result that the student's kernels did not store (kernels.stores): an assertion of
    the test it occurred in, with the same message in a student's run and in the grader's."""


KERNEL_STORES = "kernel_stores"


def checked_stores(scenario: Callable | str, kwargs: dict, answer: Any) -> Any:
    """`answer` without its "kernel_stores", once every result it accounts for was stored, element by
    element, by the student's kernels. A scenario marked `stores = True` that ran on the CPU (so under
    Triton's interpreter, where stores are observed) must carry the account; elsewhere (a GPU) it has none.
    Raises NotComputedByKernel naming the result and how many elements are not the kernels'."""
    __tracebackhide__ = True
    marked = getattr(scenario, "stores", False) is True
    expected = marked and str(kwargs.get("device", "cpu")).startswith("cpu")
    if type(answer) is not dict or KERNEL_STORES not in answer:
        if expected:
            raise NotComputedByKernel("no Triton kernel of your package ran (the result must be computed by a "
                                      "@triton.jit kernel launched by your function)")
        return answer
    answer = dict(answer)
    found = answer.pop(KERNEL_STORES)
    if not marked:  # a scenario shared with code that is not a Triton task (the PyTorch FlashAttention)
        return answer
    fields = ("elements", "unwritten", "differs")
    if type(found) is not dict or any(type(k) is not str or type(v) is not dict or set(v) != set(fields)
                                      or any(type(v[f]) is not int for f in fields) for k, v in found.items()):
        raise NotComputedByKernel("the record of your kernels' stores is malformed")
    if expected and set(found) != {k for k, v in answer.items() if _is_tensor(v)}:
        missing = sorted({k for k, v in answer.items() if _is_tensor(v)} - set(found))
        raise NotComputedByKernel(f"{', '.join(missing)}: no Triton kernel of your package stored it")
    problems = [f"{name}: {a['unwritten']} of its {a['elements']} elements were not stored by your kernels and "
                f"{a['differs']} hold another value than your kernel stored there"
                for name, a in sorted(found.items()) if a["unwritten"] or a["differs"]]
    if problems:
        raise NotComputedByKernel("; ".join(problems) + ". A Triton task's result is what your @triton.jit "
                                  "kernels store (host code may allocate, view, copy and cast it, not compute or "
                                  "overwrite it: through numpy, a torch op or otherwise)")
    return answer


def _is_tensor(value: Any) -> bool:
    return type(value).__name__ == "Tensor" and type(value).__module__ == "torch"


class MissingFunction(Exception):
    """The submission lacks a module or a function the handout's contract names.

    Not an AttributeError or ImportError, so no test expecting those can pass on a missing function.
    """


def target_name(module: str, qualname: str) -> str:
    return f"{module}:{qualname}"


def scenario_name(scenario: Callable | str) -> str:
    """`package.scenarios:function`, checked to name a function of a scenarios module."""
    name = scenario if isinstance(scenario, str) else target_name(scenario.__module__, scenario.__qualname__)
    module, _, qualname = name.partition(":")
    if not module.endswith(SCENARIO_MODULE_SUFFIX) or not qualname or "." in qualname:
        raise ValueError(f"{name!r} is not a top-level function of a '*{SCENARIO_MODULE_SUFFIX}' module")
    return name


def resolve(target: str) -> Any:
    """Import `module:qualname` and return the object, with a message the student can act on."""
    __tracebackhide__ = True
    module_name, _, qualname = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise MissingFunction(
                f"module {module_name} was not found: the submission must have "
                f"{module_name.replace('.', '/')}.py (see the handout's file list)"
            ) from None
        raise
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise MissingFunction(
                f"{module_name} has no {qualname!r}: the handout's contract requires it with the "
                "exact name and signature"
            )
        obj = getattr(obj, part)
    return obj


class Student:
    """What a test may ask of student code. Subclasses say where that code runs."""

    def call(self, target: str, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def run(self, scenario: Callable | str, **kwargs: Any) -> Any:
        raise NotImplementedError

    def module(self, name: str) -> "ModuleProxy":
        return ModuleProxy(self, name)

    def __repr__(self) -> str:
        return "student"  # assertion explanations then read like the test: `student.module('m').f(...)`


class ModuleProxy:
    """`proxy.fn(*args)` is `student.call("module:fn", *args)`."""

    def __init__(self, student: Student, name: str) -> None:
        self._student = student
        self._name = name

    def __getattr__(self, qualname: str) -> Callable[..., Any]:
        if qualname.startswith("__"):
            raise AttributeError(qualname)

        def call(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # a failure's traceback goes from the test to the student's code
            return self._student.call(target_name(self._name, qualname), *args, **kwargs)

        call.__name__ = call.__qualname__ = qualname
        return call

    def __repr__(self) -> str:
        return f"student.module({self._name!r})"


class LocalStudent(Student):
    """Runs student code in this process (a student's `make test`). Exceptions propagate as they are."""

    def call(self, target: str, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        fn = resolve(target)
        args, kwargs = wire.roundtrip((args, kwargs))
        return wire.roundtrip(fn(*args, **kwargs))

    def run(self, scenario: Callable | str, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        fn = resolve(scenario_name(scenario))
        return checked_stores(scenario, kwargs, wire.roundtrip(fn(**wire.roundtrip(kwargs))))
