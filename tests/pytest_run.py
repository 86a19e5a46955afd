"""Run pytest in a new process, as `python -m pytest ARGS` would, without paying for Python's start each time.

The suite runs pytest against planted mistakes and alternatives some sixty times; each fresh interpreter
spends about two seconds importing torch, numpy, pytest and its plugins before it collects a test. Here a
forkserver (multiprocessing's) imports those once, and each run is a fork of it: a new process, with the
caller's environment, working folder and arguments, whose stdout and stderr are captured, as
`subprocess.run` would give them. Nothing of the calling process leaks in: the forkserver imports only the
modules named in PRELOAD, the child forgets the repository's modules it imported to start (this one, and its
package `tests`: a run's own `tests` may be another), and its sys.path is the interpreter's own with the working
folder first, as under `python -m`.

Triton and torch._dynamo are among the preloaded modules (a second and a half of each run: every suite enters a
TorchDispatchMode, which imports both). Triton fixes its mode when it is imported (the jitted functions of
triton.language are interpreted or compiled from then on), and the forkserver imports it in the mode this
process's environment gives. A run whose environment gives the other mode would meet Triton in the wrong one: it
runs in a new interpreter instead (`subprocess.run`), as `python -m pytest` would.

A run that imports Triton interpreted cannot build: each compile request of the hidden compile checks would start
a new `python -m kernels.crosscompile --request` process (about 3 CPU s of imports before its first build). The
runs are given, in LLMSYS_COMPILE_SERVER, a warm compiler this process starts once (kernels.crosscompile.server),
whose forked children answer as that new process would. A run whose environment already says
LLMSYS_COMPILE_SERVER (empty: none) keeps it.

What the forkserver imported is then frozen out of the garbage collector's reach (`gc.freeze`,
tests/forkserver/llmsys_forkserver_ready.py): pytest collects twice at the end of every run and Hypothesis once
at its first test, and each such collection walked all of torch's objects, a third of a second of each run.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What every run imports before its first test: torch, numpy and pytest, and the plugins pytest loads from the
# installed packages' entry points (hypothesis's imports all of hypothesis: a second of each run).
# torch._dynamo and Triton: what entering any TorchDispatchMode imports, which every suite does. Last, the module
# that freezes all of that out of the garbage collector's reach (found in READY: this Python's forkserver does not
# take the caller's sys.path).
PRELOAD = ["torch", "numpy", "pytest", "hypothesis", "_hypothesis_pytestplugin", "anyio.pytest_plugin", "xdist.plugin",
           "xdist.looponfail", "torch._dynamo", "triton", "triton.language", "llmsys_forkserver_ready"]
READY = Path(__file__).resolve().parent / "forkserver"
# pytest would rewrite the asserts of those plugins' modules had they not been imported already, and says so: not
# a warning about the run.
QUIET = ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
_context = None
_interprets = None  # the Triton mode the forkserver imported Triton in
_compiler: dict[str, object] = {}  # the warm compiler's process and socket (kernels.crosscompile.server)


def interprets(env: dict[str, str]) -> bool:
    """Whether a process with `env` runs Triton interpreted, as `kernels.device.configure_triton` decides: the
    variable where it is set, else interpreted exactly where there is no GPU."""
    import torch

    value = env.get("TRITON_INTERPRET")
    if value is None:
        return not torch.cuda.is_available()
    return value not in ("", "0")


def _server():
    global _context, _interprets
    if _context is None:
        _interprets = interprets(os.environ)
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        # The forkserver imports Triton in the mode decided here, whatever this environment leaves unsaid, and
        # finds READY's module; the runs get their own environment and sys.path (see _child).
        path = os.pathsep.join(filter(None, [str(READY), os.environ.get("PYTHONPATH")]))
        saved = {name: os.environ.get(name) for name in ("TRITON_INTERPRET", "PYTHONPATH")}
        os.environ.update(TRITON_INTERPRET="1" if _interprets else "0", PYTHONPATH=path)
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            for name, value in saved.items():
                if value is None:
                    del os.environ[name]
                else:
                    os.environ[name] = value
        _context = context
    return _context


def compile_server() -> str:
    """The socket of this process's warm compiler, started at the first run that needs one (it answers once its
    imports are done: until then a run's requests start processes of their own, as without it)."""
    from kernels.crosscompile.request import SERVER_VARIABLE

    if "socket" not in _compiler:
        import atexit
        import shutil

        folder = tempfile.mkdtemp(prefix="llmsys-cc-", dir="/tmp" if os.path.isdir("/tmp") else None)
        path = os.path.join(folder, "compiler")
        env = {k: v for k, v in os.environ.items() if k != SERVER_VARIABLE}
        process = subprocess.Popen([sys.executable, "-m", "kernels.crosscompile.server", path, str(os.getpid())],
                                   cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)

        def stop() -> None:
            process.kill()
            process.wait()
            shutil.rmtree(folder, ignore_errors=True)

        atexit.register(stop)
        _compiler.update(socket=path, process=process)
    return str(_compiler["socket"])


def _in_repository(path: str) -> bool:
    """Whether `path` lies in the repository (its trees, its tests), a virtual environment inside it aside."""
    resolved = Path(path).resolve()
    return resolved.is_relative_to(ROOT) and not resolved.is_relative_to(Path(sys.prefix).resolve())


def _base_path() -> list[str]:
    """This interpreter's sys.path without the folders a pytest run added (the repository and its trees)."""
    return [p for p in sys.path if p and not _in_repository(p)]


def _from_repository(module) -> bool:
    """Whether a module was loaded from the repository."""
    path = getattr(module, "__file__", None)
    return bool(path) and _in_repository(path)


def _child(args: list[str], cwd: str, env: dict[str, str], out: str, err: str, base: list[str]) -> None:
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = [cwd, *base]
    sys.argv = ["pytest", *args]
    for fd, name in ((1, out), (2, err)):
        handle = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(handle, fd)
        os.close(handle)
    # This module, imported here to run this function, and its package: the run's own `tests` may be another.
    for name in [name for name, module in sys.modules.items() if _from_repository(module)]:
        del sys.modules[name]
    code = 3
    try:
        import pytest

        code = int(pytest.main([*QUIET, *args]))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_pytest(args: list[str], cwd: Path, env: dict[str, str] | None = None,
               timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m pytest *args` in `cwd` with `env` (default: this process's), within `timeout` seconds:
    its exit status, stdout and stderr; subprocess.TimeoutExpired when it runs past the deadline."""
    env = dict(os.environ if env is None else env)
    context = _server()
    if interprets(env) != _interprets:  # Triton, preloaded, is in the other mode: a new interpreter
        return subprocess.run([sys.executable, "-m", "pytest", *QUIET, *args], cwd=cwd, env=env, capture_output=True,
                              text=True, errors="replace", timeout=timeout)
    if _interprets:
        from kernels.crosscompile.request import SERVER_VARIABLE

        env.setdefault(SERVER_VARIABLE, compile_server())
    with tempfile.TemporaryDirectory(prefix="pytest-run-") as folder:
        out, err = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
        process = context.Process(target=_child, args=(list(args), str(cwd), env, out, err, _base_path()))
        process.start()
        process.join(timeout)
        if process.is_alive():
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(["pytest", *args], timeout)
        read = lambda name: Path(name).read_text(errors="replace") if Path(name).exists() else ""  # noqa: E731
        return subprocess.CompletedProcess(["pytest", *args], process.exitcode, read(out), read(err))
