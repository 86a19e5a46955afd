"""Every file a reader sees, written again from the gradebook: the one source of truth.

    publish(Path("out"))    # after batch, regrade, manual import, new submission times; `autograder report OUT`

first brings the course file's roster, extensions and overrides into the gradebook (autograder.cohort.roster:
every command that writes a view reads the course file the same way, and a change is recorded once, in the
gradebook's history), then rewrites, from OUT/gradebook.sqlite alone:
  OUT/submissions/<name>/results.json, junit.xml,
      feedback.md, report.json                                  each submission's views of its stored report
      (hand-graded points included), with the late policy's section and penalised score where one applies
  OUT/grades.csv                                                 the gradebook's export
  every LMS export ever written from it (canvas.csv, lms.csv)    wherever it was written (autograder.report.lms)
  OUT/manual/*.html, *.csv                                       the grading sheets, where they were exported
  OUT/report/                                                    the cohort report

A penalised score is computed here from the raw score and the stored penalty (Gradebook.late()), so no
file keeps one that a regrade or a hand grade made stale; so is a score the course file sets (an override,
autograder.cohort.roster), shown beside the one graded. A student of the roster with no submission has no
folder: the gradebook, grades.csv and the report list them as missing. The answers of each assignment
whose release date (the course file's) has passed go into its feedback.md and results.json
(autograder/cohort/answers.py): publishing again after that date adds them. A submission the grader
failed on gets a feedback.md that says so (its traceback stays in the gradebook, for the instructor).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from autograder.cohort.answers import default_course, released_keys
from autograder.cohort.course import load_canvas_ids
from autograder.cohort.late import Lateness, feedback_lines, mark_adjusted, with_late_section
from autograder.cohort.roster import settle
from autograder.model.results import GradeReport
from autograder.report import one_folder, submission_folder, write_all
from autograder.report.answers import AnswerKey
from autograder.report.gradebook import MISSING, Final, Gradebook, finals
from autograder.report.lms import rewrite
from autograder.report.gradescope import with_late
from autograder.report.site import write_site
from autograder.written.manual import export

GRADER_FAILED = "the grader could not complete this submission; the next batch run grades it again"


def publish(out: Path, *, course: Path | None = None, now: datetime | None = None, settled: bool = False,
            notes: list[str] | None = None) -> Path:
    """Bring the course file into the gradebook (unless the caller just did: `settled`), then rewrite every
    file derived from OUT/gradebook.sqlite; return the cohort report's index.html. `course`: the course file
    (default: grading.toml of the working folder, where there is one); `now`: the time the answers' release
    dates are compared with (default: the clock); `notes` gets what to tell the instructor (the course file's
    changes, the exports that could not be written again).
    FileNotFoundError when OUT has no gradebook; CourseError when the course file is wrong; UnwrittenError,
    once every other file is written, when some submission's files could not be."""
    out = Path(out)
    if not (out / "gradebook.sqlite").is_file():
        raise FileNotFoundError(f"no gradebook at {out / 'gradebook.sqlite'}: grade the cohort first with "
                                f"`python -m autograder batch SUBMISSIONS --out {out}`")
    course = course or default_course()
    released = released_keys(course, now)
    unwritten: list[str] = []
    notes = notes if notes is not None else []
    with Gradebook(out / "gradebook.sqlite") as book:
        if course is not None and not settled:
            notes += settle(book, course, "publish").messages
        late, final = book.late(), finals(book)
        for row in book.rows():
            folder = submission_folder(out, row["name"])
            if not one_folder(out, row["name"]) or row["status"] == MISSING:
                continue  # a name that is not one folder of OUT/submissions (never made by a batch), or no submission
            report = book.report(row["name"]) or GradeReport(row["name"], log=[GRADER_FAILED])
            try:
                write_submission(report, folder, late.get(row["name"], {}), released, final.get(row["name"], {}))
            except OSError as exc:  # that submission's files only: the others, the CSV and the report go on
                unwritten.append(f"{row['name']} ({type(exc).__name__}: {exc})")
        book.export_csv(out / "grades.csv")
        notes += [f"an export could not be written again, so it is stale: {line}; export it again, or delete it"
                  for line in rewrite(book, load_canvas_ids(course) if course else None)]
    if (out / "manual").is_dir():
        export(out)
    index = write_site(out)
    if unwritten:
        raise UnwrittenError(f"the files of {len(unwritten)} submission(s) could not be written: "
                             f"{'; '.join(unwritten[:5])}{' ...' if len(unwritten) > 5 else ''} (their grades are in "
                             f"the gradebook; every other file is written: free the space or move what is in the "
                             f"way, then `python -m autograder report {out}`)")
    return index


class UnwrittenError(OSError):
    """Some submissions' files could not be written; everything else was (the message names them)."""


def write_submission(report: GradeReport, folder: Path, late: dict[str, dict],
                     released: dict[str, AnswerKey] | None = None, final: dict[str, Final] | None = None) -> None:
    """One submission's files: its reports (with the `released` answers), then the late policy's lines and
    penalised score where `late` (its rows of Gradebook.late()) holds any, then the course file's overrides
    where `final` (its rows of autograder.report.gradebook.finals()) holds any."""
    write_all(report, folder, released)
    if not report.tests:
        return
    if late:
        _write_late(folder, late)
    mark_adjusted(folder, {a: (f.final, f.penalised, f.maximum) for a, f in (final or {}).items() if f.adjusted},
                  excused_counts=False)


def _write_late(folder: Path, late: dict[str, dict]) -> None:
    """The late policy's lines under feedback.md's title, and its penalised score in results.json."""
    entries = [Lateness.from_row(row) for row in late.values()]
    feedback = folder / "feedback.md"
    feedback.write_text(with_late_section(feedback.read_text(encoding="utf-8"), entries), encoding="utf-8")
    lines = [line.removeprefix("- ").replace("**", "") for line in feedback_lines(entries)]
    results = folder / "results.json"
    deducted = sum(e.score - e.penalised for e in entries)
    results.write_text(json.dumps(with_late(json.loads(results.read_text()), lines, deducted), indent=2) + "\n")
