"""Give the suite's bytecode folder the environment's compiled bytecode: `make test`, before the tests.

    PYTHONPYCACHEPREFIX=build/pycache .venv/bin/python scripts/seed_pycache.py

`make test` runs its many Python processes with PYTHONPYCACHEPREFIX=build/pycache, where Python then reads and
writes all bytecode, the installed packages' too: the `.pyc` files `make install` compiled into the environment
are not read. In a fresh clone every process of the suite's first minutes would compile torch, Jupyter and the
rest again, several at once (a dozen start together), on a machine the tests already keep busy. This links each
`.pyc` of the environment into the place Python looks for it under the prefix (a copy where a link cannot be
made), once per install: a `.pyc` holds its source's size and time, so Python still compiles again any file that
changed. Files already there are left as they are. Standard library only.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from pathlib import Path


def seed(prefix: Path, folders: list[str]) -> int:
    """Link each compiled module of `folders` into `prefix` where Python looks for it; how many were added."""
    tag = sys.implementation.cache_tag
    added = 0
    for folder in folders:
        for parent, _, files in os.walk(folder):
            if os.path.basename(parent) != "__pycache__":
                continue
            for name in files:
                stem, _, rest = name.partition(".")
                if rest != f"{tag}.pyc":  # optimised (.opt-1) and other interpreters' bytecode: not read here
                    continue
                source = os.path.join(os.path.dirname(parent), stem + ".py")
                target = Path(importlib.util.cache_from_source(source))
                if not target.is_relative_to(prefix) or target.exists() or not os.path.exists(source):
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(os.path.join(parent, name), target)
                except OSError:
                    shutil.copy2(os.path.join(parent, name), target)
                added += 1
    return added


def main() -> int:
    if sys.pycache_prefix is None:
        print("seed_pycache: PYTHONPYCACHEPREFIX is not set: Python reads the environment's own bytecode already",
              file=sys.stderr)
        return 2
    prefix = Path(sys.pycache_prefix)
    paths = sysconfig.get_paths()
    folders = sorted({paths["purelib"], paths["platlib"]})
    stamps = sorted(p.name for p in Path(sys.prefix).glob(".installed-*"))  # make install's: one per install
    marker = prefix / f".seeded-{stamps[-1] if stamps else 'environment'}"
    if marker.exists():
        return 0
    added = seed(prefix, folders)
    prefix.mkdir(parents=True, exist_ok=True)
    for old in prefix.glob(".seeded-*"):
        old.unlink()
    marker.write_text(f"{added}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
