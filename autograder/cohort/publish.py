"""Every file a reader sees, written again from the gradebook: the one source of truth.

    publish(Path("out"))    # after batch, regrade, manual import, new submission times; `autograder report OUT`

rewrites, from OUT/gradebook.sqlite alone:
  OUT/<name>/results.json, junit.xml, feedback.md, report.json   each submission's views of its stored report
      (hand-graded points included), with the late policy's section and penalised score where one applies
  OUT/grades.csv                                                 the gradebook's export
  OUT/manual/*.html, *.csv                                       the grading sheets, where they were exported
  OUT/report/                                                    the cohort report

A penalised score is computed here from the raw score and the stored penalty (Gradebook.late()), so no
file keeps one that a regrade or a hand grade made stale. A submission the grader failed on gets a
feedback.md that says so (its traceback stays in the gradebook, for the instructor).
"""

from __future__ import annotations

import json
from pathlib import Path

from autograder.cohort.late import Lateness, feedback_lines, with_late_section
from autograder.grading.results import GradeReport
from autograder.report import write_all
from autograder.report.gradebook import Gradebook
from autograder.report.gradescope import with_late
from autograder.report.site import write_site
from autograder.written.manual import export

GRADER_FAILED = "the grader could not complete this submission; the next batch run grades it again"


def publish(out: Path) -> Path:
    """Rewrite every file derived from OUT/gradebook.sqlite; return the cohort report's index.html.
    FileNotFoundError when OUT has no gradebook."""
    out = Path(out)
    if not (out / "gradebook.sqlite").is_file():
        raise FileNotFoundError(f"no gradebook at {out / 'gradebook.sqlite'}: grade the cohort first with "
                                f"`python -m autograder batch SUBMISSIONS --out {out}`")
    with Gradebook(out / "gradebook.sqlite") as book:
        late = book.late()
        for row in book.rows():
            folder = out / row["name"]
            if folder.parent.resolve() != out.resolve():
                continue  # a name that is not one folder inside OUT (never made by a batch)
            report = book.report(row["name"]) or GradeReport(row["name"], log=[GRADER_FAILED])
            write_submission(report, folder, late.get(row["name"], {}))
        book.export_csv(out / "grades.csv")
    if (out / "manual").is_dir():
        export(out)
    return write_site(out)


def write_submission(report: GradeReport, folder: Path, late: dict[str, dict]) -> None:
    """One submission's files: its reports, then the late policy's lines and penalised score where `late`
    (its rows of Gradebook.late()) holds any."""
    write_all(report, folder)
    if not late or not report.tests:
        return
    entries = [Lateness.from_row(row) for row in late.values()]
    feedback = folder / "feedback.md"
    feedback.write_text(with_late_section(feedback.read_text(encoding="utf-8"), entries), encoding="utf-8")
    lines = [line.removeprefix("- ").replace("**", "") for line in feedback_lines(entries)]
    results = folder / "results.json"
    deducted = sum(e.score - e.penalised for e in entries)
    results.write_text(json.dumps(with_late(json.loads(results.read_text()), lines, deducted), indent=2) + "\n")
