"""Reports: views of one GradeReport (terminal, Gradescope, JUnit, Markdown) and the gradebook.

`write_all(report, out, released)` writes every file view of one submission into `out` (with the answers of
the assignments in `released`, autograder/cohort/answers.py, where their release date has passed):
  results.json  Gradescope's autograder results (none for a report without a score: write_results says why)
  junit.xml     JUnit XML, one testsuite per assignment
  feedback.md   the student's feedback (hidden tests only as a count)
  report.json   GradeReport.to_json(), the lossless form the others can be rebuilt from

In a batch's output folder each submission's files go to `submission_folder(OUT, name)`, i.e.
OUT/submissions/<name>/, apart from the batch's own files (gradebook.sqlite, grades.csv, report/, manual/ ...):
no submission name can collide with one of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from autograder.report.gradescope import results_json, write_results
from autograder.report.junit import junit_xml
from autograder.report.markdown import feedback_markdown
from autograder.model.results import GradeReport
from autograder.report.answers import AnswerKey

__all__ = ["SUBMISSIONS", "feedback_markdown", "junit_xml", "one_folder", "results_json", "submission_folder",
           "write_all"]

SUBMISSIONS = "submissions"  # the folder of a batch's output that holds one folder per submission


def submission_folder(out: Path, name: str) -> Path:
    """OUT/submissions/<name>/: where a batch writes one submission's files (write_all)."""
    return Path(out) / SUBMISSIONS / name


def one_folder(out: Path, name: str) -> bool:
    """Whether `name` names exactly one folder of OUT/submissions, as every name a batch makes does (a
    gradebook row edited by hand could hold "../x" or "a/b": nothing is read or written for it)."""
    return submission_folder(out, name).resolve().parent == (Path(out) / SUBMISSIONS).resolve()


def write_all(report: GradeReport, out: Path, released: Mapping[str, AnswerKey] | None = None) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_results(report, out / "results.json", released)
    (out / "junit.xml").write_text(junit_xml(report), encoding="utf-8")
    (out / "feedback.md").write_text(feedback_markdown(report, released), encoding="utf-8")
    (out / "report.json").write_text(report.to_json() + "\n")
