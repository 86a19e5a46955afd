"""The trusted grader on an nbgrader course: grade the submitted notebooks in the sandbox, and write
the scores into the course's gradebook through nbgrader's own Gradebook API.

    python -m autograder nbgrader COURSE_DIR ASSIGNMENT [--workers N] [--timeout S]

nbgrader's own autograde runs student code in the kernel that runs the tests, so a notebook can
change its own score (an input transformer is enough). Here each submitted notebook is turned into
the package layout (autograder.grading.notebook) and graded like any submission, student code in the
sandboxed worker, by warm grading servers as a batch is (one per worker: a fresh sandboxed worker forked for each
notebook). Each test cell then gets, as its manual score (which nbgrader counts instead of its
own autograded one), its points times the share of its group's points (collect.group_of) that the
trusted grader awarded, out of those it could grade on this machine; the trusted grader's cell
(autograder.package.nbgrader.TRUSTED_CELL, worth the tests needing the reference solution and the numeric
parts of the written answers) gets the rest of the trusted score. So nbgrader's gradebook holds the grade:
its test cells and the trusted cell add up to the trusted report's score, and all its graded cells (the
written answers' cells, which formgrader grades by hand, included) to the report's maximum
(autograder.report.parts), and `nbgrader export` shows the same points out of the same maximum as the
trusted feedback. A notebook the grader could not grade (not gradable, or the grader's failure) has no
score: its cells are left needing a manual grade, never a 0, and the comment says why. Cells and groups
are read from the course's source notebook, never from the submission.
The notebook's first module cell gets a comment saying so, with what the static scan flagged. The
randomised tests draw from the student's own seed, derived from their nbgrader student id (as a batch derives
it from a submission folder of that name), not from the notebook's name, which every student shares. The
full reports (feedback.md, results.json, ...) go to COURSE_DIR/trusted/<student>/<assignment>/<notebook>/.
"""

from __future__ import annotations

import glob
import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.package.collect import group_of
from autograder.package.layout import assignments
from autograder.package.nbgrader import TRUSTED_CELL, course_config, use_this_environment, write_feedback
from autograder.grading.notebook import SCAN_MARK
from autograder.model.results import GradeReport
from autograder.report import write_all
from autograder.report.gradescope import no_score, scored as has_score
from autograder.report.parts import describe, parts_of
from autograder.report.text import points, rounded

TRUSTED = "(trusted grader)"  # the group of the trusted grader's cell: no test file has this group


class CourseError(Exception):
    """The course directory or assignment cannot be graded; the message says what to do."""


@dataclass
class TestCell:
    __test__ = False  # not a pytest test class, despite the name

    grade_id: str
    points: float
    group: str


@dataclass
class NotebookScore:
    student: str
    notebook: str  # nbgrader's notebook id: the file name without .ipynb
    cells: dict[str, tuple[float | None, float]] = field(default_factory=dict)  # grade_id -> (points, max)
    report: GradeReport | None = None
    flags: list[str] = field(default_factory=list)

    @property
    def graded(self) -> bool:
        """Whether the trusted grader gave a score (None points in every cell where it did not)."""
        return self.report is not None and has_score(self.report)

    @property
    def points(self) -> float:
        return rounded(sum(points or 0.0 for points, _ in self.cells.values()))

    @property
    def max_points(self) -> float:
        return sum(maximum for _, maximum in self.cells.values())


def test_cells(source: Path) -> tuple[list[TestCell], str]:
    """The graded test cells of a source notebook, and the grade id of its first module cell."""
    nb = nbformat.read(source, as_version=4)
    cells, first_module = [], ""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        group = cell.metadata.get("llmsys", {}).get("group")
        if group is not None and meta.get("grade"):
            cells.append(TestCell(meta["grade_id"], float(meta["points"]), group))
        elif cell.metadata.get("llmsys", {}).get("trusted") and meta.get("grade_id") == TRUSTED_CELL:
            cells.append(TestCell(TRUSTED_CELL, float(meta["points"]), TRUSTED))
        elif cell.metadata.get("llmsys", {}).get("module") and not first_module:
            first_module = meta.get("grade_id", "")
    return cells, first_module


def submissions(coursedir, assignment: str) -> dict[str, Path]:
    """Student id -> the submitted assignment folder, where nbgrader's directory structure puts it."""
    step = coursedir.submitted_directory
    pattern = re.compile(coursedir.format_path(step, "(?P<student_id>[^/]+)", re.escape(assignment), escape=True))
    found = {}
    for folder in sorted(glob.glob(coursedir.format_path(step, "*", glob.escape(assignment)))):
        match = pattern.fullmatch(folder)
        if match and Path(folder).is_dir():
            found[match.group("student_id")] = Path(folder)
    return found


def scored(student: str, notebook: str, cells: list[TestCell], report: GradeReport) -> NotebookScore:
    """Each test cell's points: its share of what the trusted grader awarded the cell's group; the trusted
    grader's cell: the rest of the trusted score (the tests no cell runs). No points at all (None) where the
    report has no score."""
    result = NotebookScore(student, notebook, report=report,
                           flags=[line for line in report.log if SCAN_MARK in line])
    if not has_score(report):
        result.cells = {cell.grade_id: (None, cell.points) for cell in cells}
        return result
    for cell in cells:
        if cell.group != TRUSTED:
            group = parts_of(t for t in report.tests if group_of(t.name) == cell.group)
            share = group.score / group.graded if group.graded else 0.0  # out of the points graded here
            result.cells[cell.grade_id] = (round(cell.points * share, 2), cell.points)
    for cell in cells:
        if cell.group == TRUSTED:
            rest = rounded(parts_of(report.tests).score - sum(got for got, _ in result.cells.values()))
            result.cells[cell.grade_id] = (min(max(rest, 0.0), cell.points), cell.points)
    return result


def why_they_differ(result: NotebookScore) -> str:
    """One sentence, in the nbgrader comment and in the trusted feedback alike: nbgrader's points on the
    notebook's graded cells against the trusted report's own points (autograder.report.parts)."""
    if not result.graded:
        return (f"nbgrader: no score on the notebook's graded cells (left needing a manual grade, not a 0); the "
                f"trusted grader's report: {no_score(result.report) if result.report else 'not graded'}.")
    return (f"nbgrader: {points(result.points)} / {points(result.max_points)} points on the notebook's test cells and "
            f"the trusted grader's cell; the trusted grader's report: {describe(parts_of(result.report.tests))}. "
            "The same score: each test cell gets the share of its points that the trusted grader awarded its group "
            "of tests, and the trusted grader's cell the rest (the tests that need the reference solution, the "
            "numeric parts of the written answers); the written answers' cells are graded by hand in formgrader, "
            "as the points awaiting hand grading.")


def comment(result: NotebookScore) -> str:
    lines = [f"Scored by the course's trusted grader, which ran this notebook's modules in a sandbox: "
             + (f"{points(result.points)} / {points(result.max_points)} points on the test cells and the trusted "
                "grader's cell." if result.graded else "no score."),
             why_they_differ(result)]
    if result.report is None or not result.report.tests:
        lines.append("Grading did not complete: " + "; ".join((result.report.log if result.report else [])[-3:]))
    lines += [f"Flagged: {flag}" for flag in result.flags]
    return "\n".join(lines)


def record(gradebook, assignment: str, result: NotebookScore, comment_cell: str) -> None:
    """Write one notebook's scores (manual scores of its test cells) and the comment into the gradebook."""
    from nbgrader.api import MissingEntry
    from sqlalchemy.exc import SAWarning

    gradebook.update_or_create_student(result.student)
    try:
        gradebook.find_submission(assignment, result.student)
    except MissingEntry:
        with warnings.catch_warnings():
            # nbgrader's add_submission trips SQLAlchemy 2's autoflush warnings; the rows are written.
            warnings.simplefilter("ignore", SAWarning)
            gradebook.add_submission(assignment, result.student)
    for grade_id, (earned, _) in result.cells.items():
        grade = gradebook.find_grade(grade_id, result.notebook, assignment, result.student)
        grade.manual_score = earned
        # The trusted grader's is the only score: nbgrader's own autograde (run in the student's kernel, which its
        # code controls) must never show through, as it would where manual_score is None.
        grade.auto_score = None
        grade.needs_manual_grade = earned is None  # no score: formgrader lists it as still to grade
    if comment_cell:
        note = gradebook.find_comment(comment_cell, result.notebook, assignment, result.student)
        note.manual_comment = comment(result)
    gradebook.db.commit()


def check_gradebook(gradebook, course: Path, assignment: str,
                    notebooks: dict[Path, tuple[list[TestCell], str]]) -> None:
    """Raise CourseError, naming what is missing and what to run, where the gradebook lacks the assignment, one
    of its notebooks (source notebook -> its test_cells) or a cell whose score or comment grading would write:
    before any notebook is graded."""
    from nbgrader.api import MissingEntry

    fix = (f"run `nbgrader generate_assignment {assignment} --force` in {course} (`make nbgrader` writes a course "
           "whose gradebook has it), then grade again")
    try:
        gradebook.find_assignment(assignment)
    except MissingEntry:
        raise CourseError(f"the gradebook of {course} has no assignment {assignment!r}: {fix}") from None
    for nb, (cells, comment_cell) in notebooks.items():
        try:
            gradebook.find_notebook(nb.stem, assignment)
        except MissingEntry:
            raise CourseError(f"the gradebook of {course} has no notebook {nb.stem!r} in {assignment!r}: "
                              f"{fix}") from None
        wanted = [(cell.grade_id, gradebook.find_grade_cell) for cell in cells]
        wanted += [(comment_cell, gradebook.find_solution_cell)] if comment_cell else []
        for name, find in wanted:
            try:
                find(name, nb.stem, assignment)
            except MissingEntry:
                raise CourseError(f"the gradebook of {course} has no cell {name!r} in the notebook {nb.stem!r} of "
                                  f"{assignment!r} (generated from another version of the notebook?): {fix}") from None


def grade_course(course: Path, assignment: str, *, workers: int = 1, call_timeout: float = 60.0,
                 released: dict | None = None) -> list[NotebookScore]:
    """Grade every submitted notebook of the assignment and record the scores; return them. The feedback
    holds the answers of the assignments in `released` (autograder.cohort.answers: after their release)."""
    from nbgrader.api import Gradebook
    from nbgrader.coursedir import CourseDirectory

    from autograder.grading.client import ServerPool, grade, overlaps

    use_this_environment()
    coursedir = CourseDirectory(config=course_config(course))
    source = Path(coursedir.format_path(coursedir.source_directory, ".", assignment))
    notebooks = sorted(source.glob("*.ipynb"))
    if not notebooks:
        raise CourseError(f"{source} holds no notebook: is {assignment!r} an assignment of {course}? "
                          "(make nbgrader writes a course's source/)")
    package = assignment if assignment in assignments() else None
    jobs = [(student, folder / nb.name, nb) for student, folder in submissions(coursedir, assignment).items()
            for nb in notebooks if (folder / nb.name).is_file()]
    out = Path(coursedir.root) / "trusted"
    cells_of = {nb: test_cells(nb) for nb in notebooks}  # each source notebook read once, whatever the class's size
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        check_gradebook(gradebook, course, assignment, cells_of)

    # Warm grading servers, one per worker, as a batch grades: each imports torch, the reference and the tests
    # once and forks a fresh sandboxed worker per notebook. A notebook that met an overloaded machine is graded
    # again by a runner of its own, which tries again before it gives up (client.grade).
    servers = ServerPool(call_timeout=call_timeout, overlap=overlaps("auto", workers))

    def run(job: tuple[str, Path, Path]) -> GradeReport:
        student, submitted, _ = job
        where = dict(out=out / student / assignment / submitted.stem, assignment=package, released=released,
                     seed_name=student)
        report = servers.grade(submitted, **where)
        if report.overloaded:
            report = grade(submitted, call_timeout=call_timeout, **where)
        return report

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            reports = list(pool.map(run, jobs))
    finally:
        servers.close()
    results = []
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        for (student, submitted, nb), report in zip(jobs, reports):
            cells, comment_cell = cells_of[nb]
            result = scored(student, submitted.stem, cells, report)
            record(gradebook, assignment, result, comment_cell)
            if report.tests:  # the trusted feedback says what nbgrader's comment says
                report.log = [why_they_differ(result), *report.log]
                write_all(report, out / student / assignment / submitted.stem, released)
            write_feedback(course, assignment, student, submitted.stem, report, released)
            results.append(result)
    return results
