"""Calls of @triton.jit functions from kernel code, under Triton's interpreter, without patching again what is patched.

Under TRITON_INTERPRET=1 a launch runs each program of its grid in Python, with the builtins of triton.language
replaced by numpy versions for the launch: `GridExecutor.__call__` calls `_patch_lang(kernel)` and restores what it
replaced when the launch ends (triton/runtime/interpreter.py, 3.6 and the locked 3.7.1). Triton also calls
`_patch_lang` at every call of a @triton.jit function from kernel code (`InterpretedFunction.__call__`): for each of
triton.language and triton.language.core that the function's module holds, a scan of all their members
(`inspect.getmembers`, about 0.2 ms a call here) that finds nothing left to replace, the launch having replaced it.
A FlashAttention kernel calls its helpers, and Triton's own `tl.zeros`, `tl.sum` and `tl.max` (which are @triton.jit
functions of triton.language.standard), in every iteration of every program: the scans were a fifth of the CPU of
the interpreted FlashAttention tests.

`install()` makes a call within a launch skip the patching when every module it would patch has been patched in that
launch: by the launch itself, or by an earlier call of that launch (triton.language.core, which the launch does not
patch, is patched by the first call of `tl.sum` or the like, as before, and by no later one). The first patching of
each module in a launch, the patching outside a launch and the launch's restoring at its end are Triton's own,
unchanged; so is everything a program computes.
"""

from __future__ import annotations

import threading

_STATE = threading.local()  # .patched: ids of the modules patched in this thread's launch; absent outside a launch


class _NothingToRestore:
    """What a skipped patching returns in place of Triton's scope (a call of a jit function ignores it)."""

    def restore(self) -> None:
        pass


def _languages(fn, tl) -> frozenset[int]:
    """The ids of triton.language (`tl`) and triton.language.core among the globals of `fn`: what `_patch_lang(fn)`
    patches."""
    return frozenset(id(value) for value in list(fn.__globals__.values()) if value is tl or value is tl.core)


def install() -> bool:
    """Skip the patching already done within a launch (see the module); False where Triton's interpreter has not the
    two functions this relies on. Installing twice changes nothing."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    executor = getattr(interpreter, "GridExecutor", None)
    patch = getattr(interpreter, "_patch_lang", None)
    if executor is None or not callable(patch) or "__call__" not in executor.__dict__:
        return False
    if getattr(patch, "_skips_what_is_patched", False):
        return True
    launch = executor.__dict__["__call__"]

    def launch_tracking_patches(self, *args, **kwargs):
        outer = getattr(_STATE, "patched", None)
        _STATE.patched = frozenset()
        try:
            return launch(self, *args, **kwargs)
        finally:
            if outer is None:
                del _STATE.patched
            else:
                _STATE.patched = outer

    def patch_lang(fn):
        patched = getattr(_STATE, "patched", None)
        if patched is None:  # outside a launch: as Triton does
            return patch(fn)
        languages = _languages(fn, tl)
        if languages and languages <= patched:
            return _NothingToRestore()
        scope = patch(fn)  # Triton's own, which also refuses a function that holds neither module
        _STATE.patched = patched | languages
        return scope

    patch_lang._skips_what_is_patched = True
    launch_tracking_patches._skips_what_is_patched = True
    executor.__call__ = launch_tracking_patches
    interpreter._patch_lang = patch_lang
    return True
