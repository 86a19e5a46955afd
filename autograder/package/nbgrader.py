"""The nbgrader course: a source notebook per assignment, generated from the solutions, then its release.

    python -m autograder.package.nbgrader dist/nbgrader

writes the course directory: nbgrader_config.py, and for each assignment source/<a>/<a>.ipynb (see
notebook.py for how the notebook maps to the package) beside what its test cells need (the public
tests, kernels/, the test harness, notebook_tests.py, a pytest.ini). Then nbgrader's own
GenerateAssignment (what `nbgrader generate_assignment` runs) writes the student version to
release/<a>/ and records the assignment, with its hidden tests, in the course's gradebook.db.

One graded cell more ends each notebook, `trusted_grader`: it carries the points that only the trusted grader
awards (the tests that need the reference solution, the numeric parts of the written answers), so that the
notebook's graded cells add up to the assignment's maximum, the one every other view uses
(autograder.report.parts): nbgrader's gradebook then holds the grade, points and maximum alike
(autograder.package.nbgrader_scores scores the cell). nbgrader's own autograde gives it 0: it cannot award
those points.
`write_feedback` puts the trusted grader's feedback where nbgrader's release_feedback looks for it.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
from pathlib import Path

import nbformat

from autograder.package.collect import CollectedTest, collect
from autograder.package.layout import (HARNESS, ROOT, assignments, copy, files_of, public_tests, reset, write_bytes,
                                       write_text)
from autograder.package.notebook import build_notebook, write_notebook
from autograder.report.text import points

TEMPLATES = Path(__file__).with_name("templates")
NOTEBOOK_HELPERS = ("autograder/package/__init__.py", "autograder/package/notebook_tests.py")


def use_this_environment() -> None:
    """Put this interpreter's scripts first on PATH: nbgrader runs the `alembic` command by name when it
    opens a gradebook, and a virtual environment used without activating it is not on PATH."""
    scripts = str(Path(sys.executable).parent)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != scripts:
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")


def course_config(course: Path):
    """The course's nbgrader_config.py, loaded as nbgrader loads it, with the course as its root."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    config.CourseDirectory.root = str(Path(course).resolve())
    return config


# Folders of an assignment's package that hold data, not code: the staff's measurements its handout's
# questions read (gpu_kernels/measured/, §7 and T10).
DATA_FOLDERS = ("measured",)


TRUSTED_CELL = "trusted_grader"  # the grade id of the cell of the points only the trusted grader awards


def trusted_points(assignment: str, tests: list[CollectedTest]) -> tuple[float, float]:
    """(the points of the tests that need the reference solution and no GPU, the points of the written answers'
    numeric parts) of an assignment: what no cell of its notebook runs, and the trusted grader grades."""
    from autograder.written.answers import handout_questions

    reference = sum(t.points for t in tests if t.assignment == assignment and t.reference and not t.gpu)
    return reference, sum(part.points for question in handout_questions(assignment) for part in question.parts)


def trusted_cell(assignment: str, tests: list[CollectedTest]) -> nbformat.NotebookNode:
    """The last graded cell: the trusted grader's own points; it outputs 0 when the notebook runs it."""
    reference, numeric = trusted_points(assignment, tests)
    source = "\n".join([f"# {points(reference + numeric)} points only the course's trusted grader awards: the tests "
                        f"that compare with the reference solution ({points(reference)} points) and the numeric "
                        f"parts of the written answers ({points(numeric)} points).",
                        "# It grades them when it grades this notebook; run here, this cell gives 0.", "0"])
    metadata = {"nbgrader": {"grade": True, "grade_id": TRUSTED_CELL, "locked": True, "points": reference + numeric,
                             "schema_version": 3, "solution": False}, "llmsys": {"trusted": True}}
    return nbformat.v4.new_code_cell(source, id=TRUSTED_CELL.replace("_", "-"), metadata=metadata)


def write_source(course: Path, assignment: str, tests: list[CollectedTest]) -> None:
    """source/<assignment>/: the notebook (with the trusted grader's cell last) and the files its test cells need."""
    folder = course / "source" / assignment
    notebook = build_notebook(assignment, tests)
    notebook.cells.append(trusted_cell(assignment, tests))
    write_notebook(notebook, folder / f"{assignment}.ipynb")
    copy(public_tests([assignment]) + ["kernels", *HARNESS, *NOTEBOOK_HELPERS, "conftest.py"], folder)
    write_text(folder / "pytest.ini", (TEMPLATES / "notebook_pytest.ini").read_text(encoding="utf-8"))
    for data in DATA_FOLDERS:  # where the package of the other releases has them: <assignment>/measured/...
        if (ROOT / "assignments" / assignment / data).is_dir():
            for file in files_of(f"assignments/{assignment}/{data}"):
                write_bytes(folder / Path(file).relative_to("assignments"), (ROOT / file).read_bytes())


class CourseError(Exception):
    """nbgrader could not convert the course; the message holds nbgrader's log."""


def generate_assignment(course: Path, assignment: str) -> None:
    """nbgrader's GenerateAssignment on the course: release/<assignment>/ and the gradebook's record."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.converters.base import NbGraderException
    from nbgrader.coursedir import CourseDirectory

    use_this_environment()
    config = course_config(course)
    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id = assignment
    converter = GenerateAssignment(coursedir=coursedir, config=config)
    converter.force = True
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    converter.log.addHandler(handler)
    try:
        converter.start()
    except NbGraderException:
        raise CourseError(f"nbgrader generate_assignment {assignment} failed:\n{log.getvalue()[-5000:]}") from None
    finally:
        converter.log.removeHandler(handler)


def build(dest: Path, tests: list[CollectedTest] | None = None) -> None:
    """Write the course into dest (emptied first). `tests` defaults to a fresh collection."""
    names = assignments()
    tests = collect(names) if tests is None else tests
    reset(dest)
    write_text(dest / "nbgrader_config.py", (TEMPLATES / "nbgrader_config.py").read_text(encoding="utf-8"))
    for name in names:
        write_source(dest, name, tests)
    for name in names:
        generate_assignment(dest, name)


def write_feedback(course: Path, assignment: str, student: str, notebook: str, report, released=None) -> Path:
    """The trusted grader's feedback as nbgrader's feedback file, feedback/<student>/<assignment>/<notebook>.html,
    where `nbgrader release_feedback` finds it. It is feedback.md rendered (raw HTML off, so nothing a
    student printed becomes markup): hidden tests appear only as counts, and the answers section only for
    the assignments in `released` (their release date has passed: autograder.cohort.answers). nbgrader's
    timestamp and submission secret (written by `nbgrader collect`) are copied beside it, as release_feedback needs."""
    from html import escape

    from markdown_it import MarkdownIt
    from nbgrader.coursedir import CourseDirectory

    from autograder.report.markdown import feedback_markdown

    coursedir = CourseDirectory(config=course_config(course))
    folder = Path(coursedir.format_path(coursedir.feedback_directory, student, assignment))
    body = (MarkdownIt("commonmark", {"html": False}).enable("table").disable(["link", "image", "autolink"])
            .render(feedback_markdown(report, released)))  # the student's text stays text: no HTML, no links
    page = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Feedback: {escape(notebook)}</title>"
            f"</head><body>\n{body}</body></html>\n")
    write_text(folder / f"{notebook}.html", page)
    submitted = Path(coursedir.format_path(coursedir.submitted_directory, student, assignment))
    for name in ("timestamp.txt", "submission_secret.txt"):
        if (submitted / name).is_file():
            write_text(folder / name, (submitted / name).read_text(encoding="utf-8"))
    return folder / f"{notebook}.html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="the course directory to write (emptied first)")
    args = parser.parse_args(argv)
    try:
        build(args.dest)
    except CourseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote the nbgrader course to {args.dest}/ (source/ and, by nbgrader, release/ and gradebook.db)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
