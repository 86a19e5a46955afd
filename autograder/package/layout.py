"""What the channels ship, as repository paths, and how they are written: the same bytes every time.

Every packager copies files of this repository by their relative paths, in sorted order, with fixed
permissions (0o644, 0o755 for scripts), skipping caches; zips get fixed timestamps and sorted
entries. So the same repository gives the same dist/ byte for byte, wherever and whenever it is built.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = frozenset({"__pycache__", ".pytest_cache", ".ipynb_checkpoints", ".hypothesis"})
# What the student's release holds of the grader: the harness of the public tests, and the reading of the written
# answers (`make check-answers`: autograder.written.check, with the handout's parser and the solution markers).
HARNESS = ("autograder/__init__.py", "autograder/harness", "autograder/model", "autograder/written/__init__.py",
           "autograder/written/answers.py", "autograder/written/check.py")
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can hold: no build time leaks in


def assignments() -> list[str]:
    """The assignments of this repository: the packages of solutions/ (as kernels.impl.packages says)."""
    return sorted(p.parent.name for p in (ROOT / "solutions").glob("*/__init__.py"))


def public_tests(names: list[str]) -> list[str]:
    return ["tests/__init__.py"] + [f"tests/{name}" for name in names]


def files_of(rel: str) -> list[str]:
    """The repository-relative files of a file or folder, sorted, caches left out."""
    path = ROOT / rel
    if path.is_file():
        return [rel]
    if not path.is_dir():
        raise FileNotFoundError(f"{rel} is not in the repository ({ROOT}): the packagers expect it there")
    found = []
    for file in sorted(path.rglob("*")):
        parts = file.relative_to(ROOT).parts
        if file.is_file() and not SKIPPED.intersection(parts) and file.suffix != ".pyc":
            found.append(file.relative_to(ROOT).as_posix())
    return found


def reset(dest: Path) -> Path:
    """An empty folder at dest (what an earlier build left there is removed)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    return dest


def copy(rels: list[str] | tuple[str, ...], dest: Path) -> list[str]:
    """Copy the files of each repository path to the same relative path under dest."""
    written = []
    for rel in rels:
        for file in files_of(rel):
            write_bytes(dest / file, (ROOT / file).read_bytes())
            written.append(file)
    return written


def write_bytes(path: Path, data: bytes, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o755 if executable else 0o644)


def write_text(path: Path, text: str, executable: bool = False) -> None:
    write_bytes(path, text.encode("utf-8"), executable)


def tree_files(folder: Path) -> list[str]:
    """The files under folder, as sorted relative POSIX paths."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def write_zip(folder: Path, target: Path) -> None:
    """Zip folder's files into target: sorted names, fixed times, modes kept (executable or not)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w") as archive:
        for rel in tree_files(folder):
            path = folder / rel
            info = zipfile.ZipInfo(rel, date_time=ZIP_TIME)
            info.create_system = 3  # Unix, so that unzip restores the modes below
            info.external_attr = (0o100755 if path.stat().st_mode & 0o100 else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes(), compresslevel=9)
