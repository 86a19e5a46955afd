"""Gradescope: one autograder zip per assignment, for Gradescope's "zip file upload" configuration.

    python -m autograder.package.gradescope dist/gradescope        # dist/gradescope/<assignment>.zip

The zip holds setup.sh (run once to build Gradescope's image: Debian's bubblewrap, a virtual
environment, `pip install torch==2.13.0`, then requirements-instructor.lock with its hashes: the versions
the course's own grader runs, so that Gradescope and a regrade on the instructor's machine grade on the
same set) and run_autograder (run per submission: `python -m autograder grade /autograder/submission
--assignment <a> --out /autograder/results`), beside the trusted grader for that one assignment:
autograder/ with only its hidden suite, kernels/, its reference solution, its stubs and public tests, the
root conftest.py and pyproject.toml. The zip's bytes depend only on those files (layout.write_zip).

The course file (grading.toml of the repository, or --course), where the course has one, is checked whole
first (no zip is written when it is wrong), then packaged for each assignment as that assignment's
grader reads it: every table but the other assignments' [assignments.<name>] sections, extensions and
overrides, and [export]; a roster read from a CSV is written into it. That grader knows only its own
assignment, and would refuse a section of another as a misspelt name. It applies the roster's extensions and
overrides to the student Gradescope's metadata names (autograder.cohort.roster.for_gradescope). Its release date for
the answers ([answers] release, or the section's answers_release) stays: once it has passed, results.json
carries the assignment's answer key (from the handout and the hidden suite the zip holds) with Gradescope's
"after_due_date" visibility (autograder/report/gradescope.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import tempfile
import tomllib
from pathlib import Path

from autograder.cohort.course import COURSE_FILE, CourseError, check, load_roster
from autograder.package.layout import (ROOT, assignments, copy, files_of, public_tests, reset, write_text,
                                       write_zip)
from autograder.package.lock import INSTRUCTOR

TEMPLATES = Path(__file__).with_name("templates")
COURSE = ROOT / COURSE_FILE  # the course file `make gradescope` packages, where the course has one


def grader_files(assignment: str) -> list[str]:
    """The repository files the trusted grader needs to grade one assignment."""
    others = [f"autograder/suites/{name}/" for name in assignments() if name != assignment]
    grader = [rel for rel in files_of("autograder") if not rel.startswith(tuple(others))]
    return grader + [*public_tests([assignment]), "kernels", f"solutions/{assignment}", f"assignments/{assignment}",
                     "conftest.py", "pyproject.toml", INSTRUCTOR.file]


def course_file(course: Path, assignment: str) -> str:
    """The course file as the package of `assignment` holds it: without the other assignments' sections,
    extensions and overrides, nor [export]; the roster's students written into it (the zip holds no CSV)."""
    data = tomllib.loads(Path(course).read_text(encoding="utf-8"))
    sections = data.pop("assignments", {})
    if assignment in sections:
        data["assignments"] = {assignment: sections[assignment]}
    if "roster" in data:
        data["roster"] = {"students": [dataclasses.asdict(student) for student in load_roster(course)]}
    for table in ("extensions", "overrides"):
        entries = [entry for entry in data.pop(table, []) if entry.get("assignment") == assignment]
        if entries:
            data[table] = entries
    data.pop("export", None)
    return (f"# The course's {COURSE_FILE}, as `make gradescope` packaged it for {assignment}:\n"
            "# the other assignments' sections are left out.\n" + "\n".join(_toml(data)) + "\n")


def _toml(table: dict, path: tuple[str, ...] = ()) -> list[str]:
    """TOML lines of a table as tomllib parsed it: its values, then each sub-table under its header."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    for k, v in table.items():
        if isinstance(v, dict):
            header = f"[{'.'.join(_key(part) for part in (*path, k))}]"
            only_tables = v and all(isinstance(x, dict) for x in v.values())  # its header is implied
            lines += ([] if only_tables else ["", header]) + _toml(v, (*path, k))
    return lines


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _value(key)


def _value(value) -> str:
    """A TOML value: booleans, numbers (repr: also inf and nan), strings, date-times, arrays, inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):  # JSON's escapes are TOML's; TOML also wants DEL escaped
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    return value.isoformat()  # datetime, date, time


def torch_index_checked(index: str) -> str:
    """`index` if it is an http(s) URL that setup.sh can hold in double quotes, else a ValueError saying so."""
    if index and not re.fullmatch(r"https?://[^\s\"'$`\\]+", index):
        raise ValueError(f"--torch-index {index!r} is not a plain http(s) URL: give the index URL alone, e.g. the "
                         "one PyTorch's \"Get started\" page gives for Linux, pip, CPU")
    return index


def stage(assignment: str, folder: Path, course: Path | None = None, torch_index: str = "") -> None:
    """Lay out the zip's contents in folder (with the course file, where there is one, for this assignment);
    setup.sh installs torch from `torch_index` (pip's default index when empty)."""
    copy(grader_files(assignment), folder)
    if course is not None:
        write_text(folder / COURSE_FILE, course_file(course, assignment))
    setup = (TEMPLATES / "setup.sh").read_text(encoding="utf-8").replace("@TORCH_INDEX@", torch_index_checked(torch_index))
    write_text(folder / "setup.sh", setup, executable=True)
    script = (TEMPLATES / "run_autograder").read_text(encoding="utf-8").replace("@ASSIGNMENT@", assignment)
    write_text(folder / "run_autograder", script, executable=True)


def build(dest: Path, course: Path | None = None, torch_index: str = "") -> list[Path]:
    """Write dest/<assignment>.zip for every assignment (dest emptied first); return the zips. `course`: the
    course file (default: the repository's, where there is one), checked whole before anything is written;
    `torch_index`: the wheel index setup.sh installs torch from."""
    torch_index_checked(torch_index)
    course = course or (COURSE if COURSE.is_file() else None)
    if course is not None:
        check(course, assignments())
    reset(dest)
    zips = []
    for name in assignments():
        with tempfile.TemporaryDirectory(prefix="llmsys-gradescope-") as tmp:
            stage(name, Path(tmp), course, torch_index)
            write_zip(Path(tmp), dest / f"{name}.zip")
        zips.append(dest / f"{name}.zip")
    return zips


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="where to write the zips (emptied first)")
    parser.add_argument("--course", type=Path, metavar="FILE",
                        help=f"the course file (default: {COURSE_FILE} of the repository, where there is one)")
    parser.add_argument("--torch-index", default="", metavar="URL",
                        help="the wheel index setup.sh installs torch from (PyTorch's CPU-only index saves GBs)")
    args = parser.parse_args(argv)
    try:
        zips = build(args.dest, args.course, args.torch_index)
    except CourseError as exc:
        parser.error(f"{exc}\nNo zip was written: correct the course file, then run `make gradescope` again.")
    except ValueError as exc:
        parser.error(f"{exc}\nNo zip was written.")
    for path in zips:
        print(f"wrote {path} ({path.stat().st_size >> 10} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
