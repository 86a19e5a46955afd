"""A fake submission and a worker for it, as the sandbox tests build them."""

from __future__ import annotations

from pathlib import Path

from autograder.sandbox import policy
from autograder.sandbox.process import Worker
from autograder.sandbox.staging import build_lib


def submission(base: Path, package: str, modules: dict[str, str]) -> Path:
    """base/submission holding `package` with each module (name -> source), world-readable: the worker may run
    as a user of its own."""
    base.mkdir(mode=0o755, exist_ok=True)
    base.chmod(0o755)
    root = base / "submission"
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    for name, source in modules.items():
        (root / package / f"{name}.py").write_text(source)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def worker(base: Path, package: str, modules: dict[str, str], *, mode: str = "auto", call_timeout: float = 5,
           gpu: bool = False) -> Worker:
    """A worker (not started yet) of a fake submission under base, with the sandbox `mode` detects."""
    root = submission(base, package, modules)
    protections = policy.detect(mode, policy.Limits(call_timeout=call_timeout, start_timeout=120))
    return Worker(build_lib(base / "lib", []), root, base / "scratch", protections, gpu=gpu)


def zygote_root(base: Path) -> Path:
    """A zygote's stage folder, private as a grading server makes it."""
    base.mkdir(mode=0o700, parents=True)
    return base


def zygote(root: Path, protections: policy.Protections, skip: tuple[str, ...] = (), lib_modules: dict[str, str] | None = None,
           builds: bool = False):
    """A zygote started in `root` (its library at root/lib, with `lib_modules` beside the worker's: name -> source), or
    pytest.skip where this machine cannot have one."""
    import pytest

    from autograder.sandbox import forked

    usable, why = forked.available(protections, gpu=False)
    if not usable:
        pytest.skip(f"no zygote on this machine: {why}")
    lib = build_lib(root / "lib", [])
    for name, source in (lib_modules or {}).items():
        (lib / f"{name}.py").write_text(source)
        (lib / f"{name}.py").chmod(0o644)
    return forked.Zygote.start(protections, root, lib, 120, skip, builds=builds)


def forked_worker(zygote, name: str, package: str, modules: dict[str, str], protections: policy.Protections) -> Worker:
    """A worker (not started yet) of a fake submission in its own stage of the zygote's folder."""
    stage = zygote.root / name
    root = submission(stage, package, modules)
    return Worker(zygote.lib, root, stage / "scratch", protections, gpu=False, zygote=zygote)
