"""The worker library: the only code of this repository the sandboxed worker can import.

It holds the wire format, the worker loop and the call resolver, kernels/ (given code students may
import), and the scenario modules of the assignments being graded, each under its own dotted name so
that `tests.resource_accounting.scenarios:fn` means the same function on both sides. Package
`__init__` files are written empty: nothing else of tests/, autograder/ or the suites comes along.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = ("autograder/model/wire.py", "autograder/harness/student.py",
         "autograder/sandbox/framing.py", "autograder/sandbox/worker.py", "autograder/sandbox/zygote.py")


def scenario_modules(assignment: str) -> list[str]:
    """Repository-relative paths of an assignment's scenario modules (public, then hidden)."""
    candidates = (f"tests/{assignment}/scenarios.py", f"autograder/suites/{assignment}/scenarios.py")
    return [c for c in candidates if (ROOT / c).is_file()]


def build_lib(dest: Path, assignments: list[str]) -> Path:
    """Write the worker library into `dest` (world-readable) and return it."""
    files = list(FILES)
    for assignment in assignments:
        files += scenario_modules(assignment)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, target)
    shutil.copytree(ROOT / "kernels", dest / "kernels", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for folder in [p for p in dest.rglob("*") if p.is_dir()]:
        if folder.name != "kernels" and "kernels" not in folder.relative_to(dest).parts:
            (folder / "__init__.py").touch()
    for path in dest.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    dest.chmod(0o755)
    return dest


def remove_tree(path: Path, timeout: float = 600.0) -> bool:
    """Delete `path` and everything below it, however deep or wide (the worker's scratch folder is the
    student's to fill); return whether it is gone. Never raises.

    `rm -rf` walks the tree without recursion limits (shutil.rmtree raises RecursionError on a tree
    some thousand folders deep); folders the student made unreadable are opened up and it tries again.
    """
    path = Path(path)
    for command in (["rm", "-rf", "--", str(path)], ["chmod", "-R", "u+rwx", "--", str(path)],
                    ["rm", "-rf", "--", str(path)]):
        if not (path.exists() or path.is_symlink()):
            return True
        try:
            subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=timeout, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
    return not (path.exists() or path.is_symlink())
