"""The implementation switch: which tree of assignment packages the tests and benchmarks import.

One pytest option (`--impl`) and one environment variable (`LLMSYS_IMPL`) choose it; the option wins.
The value is `solutions`, `assignments` or the path of any folder with the same package layout (a
submission). The default comes from the `llmsys_impl` ini setting: `solutions` in the instructor
repository, `assignments` in the student release. Exactly one tree is ever put on sys.path.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

ENV_VAR = "LLMSYS_IMPL"
NAMED_TREES = ("solutions", "assignments")


class ImplError(Exception):
    """The chosen implementation tree is unusable; the message says why and what to do."""


def choose(option: str | None, ini_default: str) -> str:
    """The tree's name or path: the --impl option, else $LLMSYS_IMPL, else the ini default."""
    return option or os.environ.get(ENV_VAR) or ini_default


def resolve(choice: str, rootdir: Path) -> Path:
    """Turn `solutions`, `assignments` or a path into an existing folder of packages."""
    path = rootdir / choice if choice in NAMED_TREES else Path(choice).expanduser()
    path = path.resolve()
    if not path.is_dir():
        raise ImplError(
            f"implementation tree {choice!r} is not a folder ({path}); pass --impl solutions, "
            f"--impl assignments or --impl PATH (or set {ENV_VAR})"
        )
    if not packages(path):
        raise ImplError(
            f"implementation tree {path} holds no package (a folder with __init__.py, such as "
            "resource_accounting/); point --impl at the folder that contains the packages"
        )
    return path


def packages(tree: Path) -> list[str]:
    """Names of the assignment packages in a tree: its sub-folders that have an __init__.py."""
    return sorted(p.parent.name for p in tree.glob("*/__init__.py"))


def activate(tree: Path) -> None:
    """Put `tree` first on sys.path, refusing if one of its packages was imported from elsewhere."""
    for name in packages(tree):
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if module is not None and (origin is None or Path(origin).resolve().parent.parent != tree):
            raise ImplError(
                f"package {name!r} was already imported from {origin}, not from {tree}; "
                "only one implementation tree may be active in a process"
            )
    for other in (str(p) for p in sys.path):
        if other != str(tree) and Path(other or ".").resolve().name in NAMED_TREES:
            raise ImplError(f"another implementation tree is already on sys.path: {other}")
    if str(tree) not in sys.path:
        sys.path.insert(0, str(tree))
    importlib.invalidate_caches()
