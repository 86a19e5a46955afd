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
