"""Open a submission (a folder, a .zip or a notebook) into a clean copy of its package layout.

    sub = open_submission(Path("alice.zip"), stage, ["resource_accounting", "flash_attention"])
    sub.root / "resource_accounting" / "flops.py"      # the copy; sub.problems says what went wrong

Nothing in the input is trusted, and bad input never raises: what cannot be used becomes a line in
`problems` naming the file and what to do. The steps: list the entries (a folder walk that never
follows a symlink, or the zip's directory) and refuse unsafe ones (symlinks, path traversal, special
files); find the folder that holds the assignment packages; copy only those packages, checking the
size limits while reading (a zip may lie about its sizes); copy only plain source and documents
(a compiled extension module, bytecode or a .pth file beside a stub would be imported instead of the
source the static check reads: never copied, always noted) and only .py files that are UTF-8. A
notebook's entries are the modules its `%%writefile <package>/<module>.py` cells save (the mapping
autograder.package.notebook writes; autograder.grading.notebook reads it), and cells that touch
IPython's machinery become problems.

Only the packages are copied: a top-level helper module next to them is not part of the contract,
and a static check that follows imports within a package could not see into it. The copy is
world-readable (files 0o644, folders 0o755) because the sandboxed worker may run as another user.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import os
import re
import stat
import tokenize
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable, Iterator

from autograder.sandbox.staging import remove_tree

MAX_FILE_BYTES = 5 * 2**20
MAX_TOTAL_BYTES = 50 * 2**20
MAX_FILES = 2000
MAX_PROBLEMS = 30
MAX_NAME = 1024  # characters of a path inside the submission
MAX_DEPTH = 32  # folders of a path inside the submission
CHUNK = 1 << 16
DIGEST_CHUNK = 1 << 20
SKIPPED_FOLDERS = frozenset({"__pycache__", ".git", ".ipynb_checkpoints", "__MACOSX"})  # __MACOSX: Finder zips
SKIPPED_FILES = frozenset({".DS_Store"})
# What is copied besides .py source: documents, which nothing imports.
DOCUMENTS = frozenset({".md", ".txt", ".rst", ".json", ".csv", ".toml", ".yaml", ".yml", ".cfg", ".ini",
                       ".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf", ".ipynb"})
UTF8 = ("utf-8", "utf-8-sig")
ASSIGNMENTS = Path(__file__).resolve().parents[2] / "assignments"
# What reading a zip member can raise besides OSError: corrupt data, bad CRC, an encrypted member
# (RuntimeError) or an unsupported compression method (NotImplementedError).
READ_ERRORS = (OSError, EOFError, zipfile.BadZipFile, zlib.error, RuntimeError, NotImplementedError, ValueError)
REZIP = "recreate the zip from the folder (`zip -r`, or your system's Compress command)"


@dataclass
class Submission:
    name: str
    root: Path
    packages: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    digest: str = ""
    # Why nothing of it can be graded (a corrupt zip, an empty folder, a notebook that does not convert):
    # such a submission is "not gradable" with this reason, never graded as an empty one (0 points).
    refused: str = ""


class Refused(Exception):
    """Nothing of the submission can be graded; the message says why and what to do."""


@dataclass(frozen=True)
class Entry:
    """One regular file of the input: its relative path, the size it declares, and how to read it."""

    path: PurePosixPath
    size: int
    open: Callable[[], BinaryIO]


def submission_name(source: Path) -> str:
    return source.name[:-4] if source.name.endswith(".zip") else source.name


def open_submission(source: Path, dest: Path, packages: list[str]) -> Submission:
    """Copy the packages of `source` found among `packages` to dest/submission/; never raises for bad input."""
    source = Path(source)
    root = _fresh(Path(dest) / "submission")
    sub = Submission(name=submission_name(source), root=root)
    try:
        with _entries(source, packages, sub.problems) as entries:
            prefix, sub.packages = _locate(entries, packages, source, sub.problems)
            inside = [any(_is_under(e.path, prefix / p) for p in sub.packages) for e in entries]
            chosen = [e for e, keep in zip(entries, inside) if keep and _is_gradable(e.path)]
            _note_left_out([e for e, keep in zip(entries, inside) if not keep], sub.packages, sub.problems)
            _note_not_source([e for e, keep in zip(entries, inside) if keep and not _is_gradable(e.path)],
                             sub.problems)
            sub.digest = _copy(chosen, prefix, root, sub.problems)
            if chosen and not any(path.is_file() for path in root.rglob("*")) and _none_read(chosen, sub.problems):
                raise Refused(f"none of the {len(chosen)} files of {source.name} could be read (each is named "
                              f"above): {REZIP}")
    except Refused as exc:
        _refuse(sub, str(exc))
    except Exception as exc:  # noqa: BLE001  (a promise: bad input never raises; no grader internals shown)
        _refuse(sub, f"{source.name} could not be opened (the grader met {type(exc).__name__} reading it): "
                     "resubmit the package folders as a plain folder or .zip; if it persists, tell the instructor")
    if len(sub.problems) > MAX_PROBLEMS:
        more = len(sub.problems) - MAX_PROBLEMS + 1
        sub.problems[MAX_PROBLEMS - 1:] = [f"... and {more} more problems of the same kinds"]
    return sub


def packages_in(source: Path, packages: list[str]) -> list[str]:
    """The packages among `packages` that grading `source` would copy, read from its listing alone (nothing is
    copied); all of `packages` where that cannot be told (a submission open_submission would refuse, or any
    error). A grading server asks it before it hands the submission to a child (runner.serve)."""
    try:
        with _entries(Path(source), packages, []) as entries:
            return _locate(entries, packages, Path(source), [])[1]
    except Exception:  # noqa: BLE001  (only a guess for the server; the child opens the submission itself)
        return list(packages)


def _none_read(chosen: list[Entry], problems: list[str]) -> bool:
    """Whether every chosen entry could not be read (a corrupt zip's members), as opposed to, e.g., each one
    failing to parse (which is graded: the tests fail)."""
    unread = {problem.split(":", 1)[0] for problem in problems
              if ": cannot be read (" in problem or ": larger than " in problem}
    return all(str(entry.path) in unread for entry in chosen)


def _refuse(sub: Submission, problem: str) -> None:
    _fresh(sub.root)
    sub.packages, sub.digest = [], hashlib.sha256().hexdigest()
    sub.problems.append(problem)
    sub.refused = problem


def _is_gradable(path: PurePosixPath) -> bool:
    """Plain source and documents: what is copied."""
    return path.suffix == ".py" or path.suffix.lower() in DOCUMENTS


def _note_not_source(left_out: list[Entry], problems: list[str]) -> None:
    if left_out:
        names = [str(e.path) for e in left_out]
        shown = ", ".join(names[:5]) + (f" ... ({len(names)} files)" if len(names) > 5 else "")
        problems.append(f"not copied, not plain source: {shown}; only .py source (and documents) is graded: "
                        "a compiled extension module, bytecode or a .pth file would be imported instead of the "
                        "source the static check reads")


def _fresh(root: Path) -> Path:
    """An empty, world-readable folder at `root` (what an earlier opening left there is removed).

    The folder itself is kept, not recreated: a worker may already see it through a bind mount.
    """
    root.mkdir(parents=True, exist_ok=True)
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            remove_tree(child)
        else:
            child.unlink()
    root.chmod(0o755)
    return root


@contextmanager
def _entries(source: Path, packages: list[str], problems: list[str]) -> Iterator[list[Entry]]:
    """The input's regular files, minus the unsafe and the skipped ones (each unsafe one noted)."""
    if source.is_dir():
        entries = _folder_entries(source, problems)
        if not entries:
            raise Refused(f"{source.name} is empty (no files to grade): put the assignment package folders "
                          "in it")
        yield entries
        return
    if not source.exists():
        raise Refused(f"{source} does not exist: give the path of a submission folder or .zip")
    if source.suffix == ".ipynb":
        yield _notebook_entries(source, packages, problems)
        return
    if not zipfile.is_zipfile(source):
        raise Refused(f"{source.name} is not a zip archive, whatever its name: {REZIP}")
    if source.stat().st_size > MAX_TOTAL_BYTES:
        raise Refused(f"{source.name} is larger than {MAX_TOTAL_BYTES >> 20} MB: zip only the package folders")
    try:
        archive = zipfile.ZipFile(source)
    except READ_ERRORS as exc:
        raise Refused(f"{source.name} is a corrupt zip ({exc}): {REZIP}") from None
    with archive:
        entries = _zip_entries(archive, problems)
        if not entries:
            raise Refused(f"{source.name} holds no files to grade: zip the assignment package folders")
        yield entries


def _notebook_entries(source: Path, packages: list[str], problems: list[str]) -> list[Entry]:
    """The package files a notebook's module cells save, as entries to copy like a folder's."""
    if source.stat().st_size > MAX_TOTAL_BYTES:
        raise Refused(f"{source.name} is larger than {MAX_TOTAL_BYTES >> 20} MB: clear the cells' outputs "
                      "(Kernel > Restart & Clear Output) and submit it again")
    from autograder.grading.notebook import NotebookError, read_modules  # nbformat, for notebooks only

    try:
        files, notes = read_modules(source.read_bytes(), packages)
    except NotebookError as exc:
        raise Refused(f"{source.name} {exc}: submit the notebook file itself, saved by Jupyter") from None
    problems.extend(notes)
    if not files:
        raise Refused(f"{source.name} has no module cells (code cells whose first line is "
                      f"%%writefile {packages[0]}/<module>.py): submit the assignment's notebook with its "
                      "module cells")
    return [Entry(PurePosixPath(rel), len(data), partial(io.BytesIO, data)) for rel, data in sorted(files.items())]


def _skipped(path: PurePosixPath) -> bool:
    """Caches, version control and editor folders: never graded, never worth a problem."""
    return any(part in SKIPPED_FOLDERS for part in path.parts) or path.name in SKIPPED_FILES


def _too_many(count: int) -> None:
    if count > MAX_FILES:
        raise Refused(f"the submission has more than {MAX_FILES} files (or folders, or entries in one folder): "
                      "submit only the package folders (not a virtual environment, data or outputs)")


def _folder_entries(source: Path, problems: list[str]) -> list[Entry]:
    entries: list[Entry] = []
    pending = [(source, PurePosixPath())]
    folders = 0
    while pending:
        folder, rel = pending.pop()
        folders += 1
        _too_many(folders)
        try:
            with os.scandir(folder) as listing:  # a folder of millions of entries is read no further than the limit
                items = sorted(itertools.islice(listing, MAX_FILES + 1), key=lambda item: item.name)
            _too_many(len(items))
        except OSError as exc:
            problems.append(f"{rel}/: cannot be listed ({exc.strerror}), not copied: make it readable")
            continue
        for item in items:
            path = rel / item.name
            if _skipped(path):
                continue
            if len(path.parts) > MAX_DEPTH or len(str(path)) > MAX_NAME:
                problems.append(f"{str(path)[:200]}...: nested deeper than {MAX_DEPTH} folders (or a path longer "
                                f"than {MAX_NAME} characters), not copied: keep the package layout flat")
                continue
            if item.is_symlink():
                problems.append(f"{path}: a symlink, not followed and not copied: put the file itself there")
            elif item.is_dir(follow_symlinks=False):
                pending.append((Path(item.path), path))
            elif not item.is_file(follow_symlinks=False):
                problems.append(f"{path}: not a regular file (a device, socket or pipe), not copied")
            else:
                entries.append(Entry(path, item.stat(follow_symlinks=False).st_size,
                                     partial(_open_no_follow, item.path)))
                _too_many(len(entries))
    return entries


def _open_no_follow(path: str) -> BinaryIO:
    # O_NOFOLLOW: a file swapped for a symlink after the walk is still not followed.
    return os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb")


def _zip_entries(archive: zipfile.ZipFile, problems: list[str]) -> list[Entry]:
    entries: list[Entry] = []
    seen: set[PurePosixPath] = set()
    for info in archive.infolist():
        unsafe = _unsafe_name(info.filename)
        kind = stat.S_IFMT(info.external_attr >> 16)  # the Unix file type, 0 from zips made on Windows
        if unsafe:
            problems.append(f"{info.filename[:200]!r} in the zip {unsafe}: rejected, not extracted; {REZIP}")
            continue
        path = PurePosixPath(info.filename)
        if info.is_dir() or not path.parts or _skipped(path):
            continue
        if kind == stat.S_IFLNK:
            problems.append(f"{path} in the zip is a symlink: rejected; zip the file itself instead")
        elif kind not in (0, stat.S_IFREG):
            problems.append(f"{path} in the zip is not a regular file: rejected")
        elif path in seen:
            problems.append(f"{path} appears twice in the zip: the first copy is used; {REZIP}")
        else:
            seen.add(path)
            entries.append(Entry(path, info.file_size, partial(archive.open, info)))
            _too_many(len(entries))
    return entries


def _unsafe_name(name: str) -> str:
    """Why a zip member's name may not be extracted, or "" when it is safe."""
    if "\\" in name:
        return "uses backslashes (\\) in its path"
    if name.startswith("/"):
        return "is an absolute path"
    if re.match(r"[A-Za-z]:", name):
        return "starts with a drive letter"
    if ".." in name.split("/"):
        return "climbs out of the archive with '..'"
    if any(ord(char) < 32 for char in name):
        return "has control characters in its name"
    if len(name) > MAX_NAME or name.count("/") > MAX_DEPTH:
        return f"is nested deeper than {MAX_DEPTH} folders or longer than {MAX_NAME} characters"
    return ""


def _is_under(path: PurePosixPath, folder: PurePosixPath) -> bool:
    return path.parts[: len(folder.parts)] == folder.parts and len(path.parts) > len(folder.parts)


def _locate(entries: list[Entry], packages: list[str], source: Path,
            problems: list[str]) -> tuple[PurePosixPath, list[str]]:
    """The folder holding the packages: the top, `assignments/`, or those inside a single top folder."""
    folders = {parent for e in entries for parent in e.path.parents}
    tops = sorted({e.path.parts[0] for e in entries if len(e.path.parts) > 1})
    candidates = [PurePosixPath(), PurePosixPath("assignments")]
    if len(tops) == 1:
        candidates += [PurePosixPath(tops[0]), PurePosixPath(tops[0], "assignments")]
    for prefix in candidates:
        found = [p for p in packages if prefix / p in folders]
        if found:
            if prefix.parts:
                problems.append(f"the packages were found in {prefix}/ of {source.name}; graded from there")
            return prefix, found
    top_level = sorted({e.path.parts[0] + ("/" if len(e.path.parts) > 1 else "") for e in entries})
    shown = ", ".join(top_level[:10]) + (" ..." if len(top_level) > 10 else "")
    raise Refused(f"{source.name} does not have the package layout: found {shown}; expected "
                  f"{_expected_layout(packages)} (one folder per assignment, at the top of the folder or zip)")


def _note_left_out(left_out: list[Entry], packages: list[str], problems: list[str]) -> None:
    """Name the .py files outside the packages: their imports would fail in the copy."""
    names = [str(e.path) for e in left_out if e.path.suffix == ".py"]
    if names:
        shown = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
        problems.append(f"not copied, outside the package folders: {shown}; code the packages import must "
                        f"live inside them (e.g. {packages[0]}/helpers.py)")


def _expected_layout(packages: list[str]) -> str:
    """`resource_accounting/einops_ops.py, resource_accounting/flops.py, ... ...`, from the student stubs."""
    files = []
    for package in packages:
        modules = sorted(m.name for m in (ASSIGNMENTS / package).glob("*.py") if m.name != "__init__.py")
        files += [f"{package}/{m}" for m in (modules[:2] or ["__init__.py"])]
    return ", ".join(files) + " ..."


def _copy(entries: list[Entry], prefix: PurePosixPath, root: Path, problems: list[str]) -> str:
    """Write the entries below `prefix` into `root`; return the sha256 of what was written."""
    sha = hashlib.sha256()
    total = 0
    for entry in sorted(entries, key=lambda e: e.path):
        rel = entry.path.relative_to(prefix)
        data = _read(entry, problems)
        if data is None:
            continue
        if rel.suffix == ".py" and not _check_text(entry.path, data, problems):
            continue
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            raise Refused(f"the package folders hold more than {MAX_TOTAL_BYTES >> 20} MB: remove data, "
                          "checkpoints and outputs from them")
        target = root / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o644)
        except (OSError, UnicodeError) as exc:
            problems.append(f"{entry.path}: cannot be written ({exc}), not copied; {REZIP}")
            continue
        name = rel.as_posix().encode("utf-8", "surrogateescape")
        sha.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big") + data)
    for folder in (p for p in root.rglob("*") if p.is_dir()):
        folder.chmod(0o755)
    return sha.hexdigest()


def _read(entry: Entry, problems: list[str]) -> bytes | None:
    """The entry's bytes, or None (with a problem) when it is too large or unreadable.

    The limit is checked on the bytes actually read, not only on the declared size: a zip bomb
    declares a small size and inflates to gigabytes.
    """
    too_big = f"{entry.path}: larger than {MAX_FILE_BYTES >> 20} MB, not copied: submit code, not data"
    if entry.size > MAX_FILE_BYTES:
        problems.append(too_big)
        return None
    buffer = io.BytesIO()
    try:
        with entry.open() as handle:
            while chunk := handle.read(CHUNK):
                if buffer.tell() + len(chunk) > MAX_FILE_BYTES:
                    problems.append(too_big)
                    return None
                buffer.write(chunk)
    except READ_ERRORS as exc:
        problems.append(f"{entry.path}: cannot be read ({exc}), not copied; {REZIP}")
        return None
    return buffer.getvalue()


def _check_text(path: PurePosixPath, data: bytes, problems: list[str]) -> bool:
    """Whether a .py file is UTF-8 text, as the grader reads it; else a problem names the line.

    Only UTF-8 is accepted: a coding line naming another codec (latin-1, or a text transform such as
    rot13 or punycode) would make Python run something other than what the static check reads.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        problems.append(f"{path}: not copied, its coding line is not usable ({str(exc)[:100]}); save it as UTF-8 "
                        "without a coding line")
        return False
    if encoding not in UTF8:
        problems.append(f"{path}: not copied, its coding line declares {encoding[:40]}: only UTF-8 source is "
                        "graded; save it as UTF-8 and remove the coding line")
        return False
    try:
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        problems.append(f"{path} line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x}), not copied: save it "
                        "as UTF-8")
        return False
    return True


def submission_digest(entry: Path) -> str:
    """sha256 of a submission: a zip's bytes, or a folder's regular files (sorted relative paths and bytes).

    Each path and each file's contents are length-prefixed, so no two different folders hash alike.
    Symlinks are left out, as open_submission refuses them anyway.
    """
    sha = hashlib.sha256()
    if entry.is_file():
        _feed_file(sha, entry)
        return sha.hexdigest()
    files = []
    for folder, _, names in os.walk(entry):
        files += [Path(folder) / n for n in names if not (Path(folder) / n).is_symlink()]
    for path in sorted((p for p in files if p.is_file()), key=lambda p: p.relative_to(entry).as_posix()):
        relative = os.fsencode(path.relative_to(entry).as_posix())
        sha.update(len(relative).to_bytes(8, "big") + relative)
        _feed_file(sha, path)
    return sha.hexdigest()


def _feed_file(sha, path: Path) -> None:
    sha.update(path.stat().st_size.to_bytes(8, "big"))
    with open(path, "rb") as handle:
        while chunk := handle.read(DIGEST_CHUNK):
            sha.update(chunk)
