"""A submitted notebook read back into the package layout, as the trusted grader's intake does it
(autograder/package/notebook.py writes the assignment notebooks; this module reads them and runs nothing).

`read_modules`: every code cell
whose first line is `%%writefile <package>/<module>.py` gives that file, a later cell replacing an
earlier one (`-a` appends), as when the notebook runs top to bottom; the markdown answer cells
(`answer-<ID>`) give `<package>/answers.md`, a section per cell, the same file a folder submission
holds; nothing else of the notebook is used. A static scan flags cells that touch IPython's
machinery. Reading is linear in the notebook's size, with limits on the cells and on a `%%writefile` line.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import PurePosixPath

import nbformat

from autograder.written import answers as written

# What the scan flags: names through which code changes how IPython runs cells or reports errors.
MACHINERY = re.compile(r"\b(get_ipython|IPython|InteractiveShell|ipykernel|__IPYTHON__|input_transformers\w*|"
                       r"input_splitter|ast_transformers|set_custom_exc|showtraceback|showsyntaxerror|"
                       r"excepthook|displayhook|register_magic_function|run_cell\w*)\b|\.events\.(?:un)?register\b")
# IPython's %%writefile, and %%file, its alias.
WRITEFILE = re.compile(r"%%(?:writefile|file)(\s|$)")
# What IPython drops before it looks for a cell magic: the cell's leading blank lines.
LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\n)+")
SCAN_MARK = "touches IPython's machinery"  # in each problem line the scan writes
MAGICS = re.compile(r"^\s*%{1,2}(load_ext|reload_ext|config|run|capture)\b", re.MULTILINE)
MAX_CELLS = 2000  # an assignment notebook has some tens
MAX_WRITEFILE_LINE = 1000  # characters of a `%%writefile` line
SHOWN = 5  # names or cell numbers a problem line lists


class NotebookError(Exception):
    """The notebook cannot be read (not JSON, not a notebook); the message says what is wrong."""


def read_modules(data: bytes, packages: list[str]) -> tuple[dict[str, bytes], list[str]]:
    """The package files a notebook's %%writefile cells save, and the problems found (never raises for
    a readable notebook; NotebookError when it is not one, or has more than MAX_CELLS cells).

    A lone surrogate in a cell (valid JSON, not text) is kept as its bytes: the file is then not UTF-8,
    which the submission's copier reports for that file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"is not a readable notebook (not UTF-8 text at byte {exc.start})") from None
    try:
        count = len(json.loads(text).get("cells", ()))  # counted before nbformat validates every cell
    except Exception:  # noqa: BLE001  (nbformat below says what is wrong)
        count = 0
    if count > MAX_CELLS:
        raise NotebookError(f"has {count} cells, more than the {MAX_CELLS} the grader reads")
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises JSON, validation and version errors of several types
        raise NotebookError(f"is not a readable notebook ({type(exc).__name__}: {str(exc)[:200]})") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("is not a notebook (no list of cells)")
    if len(cells) > MAX_CELLS:  # an old format's worksheets
        raise NotebookError(f"has {len(cells)} cells, more than the {MAX_CELLS} the grader reads")
    parts: dict[str, list[str]] = {}
    writers: dict[str, list[int]] = {}
    problems: list[str] = []
    answers: list[tuple[str, str]] = []
    for number, cell in enumerate(cells, start=1):
        question = _answer_question(cell)
        if question is not None:
            answers.append((question, cell["source"]))
        source = cell.get("source") if isinstance(cell, dict) and cell.get("cell_type") == "code" else None
        if not isinstance(source, str):
            continue
        problems += _scan(number, source)
        first, _, body = LEADING_BLANK_LINES.sub("", source).partition("\n")
        if WRITEFILE.match(first):
            _take(number, first, body, packages, parts, writers, problems)
    for rel, numbers in writers.items():
        if len(numbers) > 1:
            more = f" ... ({len(numbers)} cells)" if len(numbers) > SHOWN else ""
            shown = ", ".join(map(str, numbers[:SHOWN])) + more
            problems.append(f"{rel} is written by cells {shown}: the last one is graded, as when the notebook runs "
                            "from top to bottom")
    files = {rel: "".join(chunks) for rel, chunks in parts.items()}
    for package in sorted({rel.split("/")[0] for rel in files}):
        files.setdefault(f"{package}/__init__.py", "")  # what the setup cell creates
    written_packages = sorted({rel.split("/")[0] for rel in files})
    if answers and len(written_packages) == 1:
        files[f"{written_packages[0]}/{written.ANSWERS}"] = written.answers_from_cells(written_packages[0], answers)
    elif answers:
        problems.append(f"the notebook's answer cells were not taken: its module cells write "
                        f"{len(written_packages)} packages, so the answers belong to none; submit one assignment's "
                        "notebook")
    return {rel: text.encode("utf-8", "surrogatepass") for rel, text in files.items()}, problems


def _answer_question(cell) -> str | None:
    """The question a markdown answer cell answers (by its id, `answer-<ID>`), or None."""
    if not isinstance(cell, dict) or cell.get("cell_type") != "markdown" or not isinstance(cell.get("source"), str):
        return None
    return written.question_of_cell(str(cell.get("id", "")))


def _take(number: int, first: str, body: str, packages: list[str], parts: dict[str, list[str]],
          writers: dict[str, list[int]], problems: list[str]) -> None:
    """Record what one %%writefile cell saves, if it is a module of the packages."""
    if len(first) > MAX_WRITEFILE_LINE:
        problems.append(f"cell {number}: its %%writefile line is longer than {MAX_WRITEFILE_LINE} characters: not "
                        "graded; keep each module cell's first line as the notebook gave it")
        return
    try:
        args = shlex.split(first[WRITEFILE.match(first).end(0):])
    except ValueError:
        args = []
    names = [a for a in args if not a.startswith("-")]
    append = any(a in ("-a", "--append") for a in args)
    path = PurePosixPath(names[0]) if len(names) == 1 else None
    if (path is None or len(path.parts) != 2 or path.parts[0] not in packages or path.suffix != ".py"
            or not path.stem.isidentifier()):
        expected = " or ".join(f"{package}/<module>.py" for package in packages)
        written = " ".join(names[:SHOWN]) + (f" ... ({len(names)} names)" if len(names) > SHOWN else "")
        problems.append(f"cell {number} writes {written[:200] or 'nothing'}, which is not a module of the "
                        f"packages ({expected}): not graded; keep each module cell's first line as the "
                        "notebook gave it")
        return
    rel = path.as_posix()
    body = body if body.endswith("\n") or not body else body + "\n"
    if append:
        parts.setdefault(rel, []).append(body)
    else:
        parts[rel] = [body]
    writers.setdefault(rel, []).append(number)


def _scan(number: int, source: str) -> list[str]:
    """A problem line when a cell's code touches IPython's machinery (a static scan: nothing is run)."""
    found = sorted({match.group(0).lstrip(".") for match in MACHINERY.finditer(source)}
                   | {f"%{name}" for name in MAGICS.findall(source)})
    if not found:
        return []
    return [f"cell {number} {SCAN_MARK} ({', '.join(found)}): under nbgrader's own autograde, "
            "such code runs in the same kernel as the tests and can change their outcome, so nbgrader's score "
            "for this notebook cannot be trusted; this grade comes from the sandboxed grader, where it has "
            "no effect"]
