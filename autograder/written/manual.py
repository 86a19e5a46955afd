"""Grading written answers by hand: grading sheets out of the gradebook, scores back into it.

    python -m autograder manual export OUT              # OUT/manual/<assignment>-<ID>.html and .csv
    python -m autograder manual import OUT SHEET.csv    # scores and comments into OUT/gradebook.sqlite

`export` writes, per question with answers to grade, a static HTML page (each submission's answer,
escaped, beside the rubric) and the same as CSV: a row per submission, a column per rubric criterion
(`c1`, `c2`, ...) and a `comment`. Scores already given are filled in. Cells that a spreadsheet would
run as a formula (starting with =, +, -, @, a tab or a carriage return) are prefixed with `'`.

`import` validates the whole sheet first (known submission and question, an answer still the one
exported, every criterion a number from 0 to its maximum; a row left blank is skipped) and writes
nothing when any row is wrong; then stores the scores in one transaction (a re-import replaces the
earlier scores of the same answers, never adds to them). The command then writes every file again from
the gradebook (autograder.cohort.publish): the reports, grades.csv, these sheets and the cohort report.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from dataclasses import dataclass
from pathlib import Path

import jinja2

from autograder.report.text import safe_cell
from autograder.report.gradebook import Gradebook, answer_digest, manual_scores, store_manual
from autograder.written.answers import PREFIX, Question, handout_questions

TEMPLATE = Path(__file__).with_name("sheet.html.j2")
FIXED = ("submission", "assignment", "question", "answer_id", "answer")
MAX_ERRORS = 20


class ManualError(Exception):
    """A grading sheet or gradebook that cannot be used; the message says what and what to do."""


@dataclass
class Sheet:
    assignment: str
    question: Question
    rows: list[dict]


def _book(out: Path) -> Gradebook:
    path = Path(out) / "gradebook.sqlite"
    if not path.is_file():
        raise ManualError(f"{path} does not exist: give the batch output folder (the --out of "
                          "`python -m autograder batch`)")
    return Gradebook(path)


@functools.lru_cache(maxsize=None)
def _questions(assignment: str) -> dict[str, Question]:
    return {q.id: q for q in handout_questions(assignment)}


def sheets(book: Gradebook) -> list[Sheet]:
    """Per question, the submissions whose answer awaits (or got) a hand score, by submission name."""
    found: dict[tuple[str, str], Sheet] = {}
    for row in book.rows():
        report = book.report(row["name"]) if row["status"] == "graded" else None
        if report is None:
            continue
        given = manual_scores(book, row["name"])
        for test in report.tests:
            if test.status not in ("manual", "hand_graded"):
                continue
            question = _questions(test.assignment).get(test.name.removeprefix(PREFIX))
            if question is None:
                continue
            sheet = found.setdefault((test.assignment, question.id), Sheet(test.assignment, question, []))
            earlier = given.get(test.name)
            current = earlier if earlier and earlier["answer_sha"] == answer_digest(test.answer) else None
            scores = [f"{v:g}" for v in current["criteria"]] if current else [""] * len(question.criteria)
            sheet.rows.append({"submission": row["name"], "answer": test.answer,
                               "answer_id": answer_digest(test.answer)[:16], "scores": scores,
                               "comment": current["comment"] if current else ""})
    return [found[key] for key in sorted(found)]


def export(out: Path) -> list[Path]:
    """Write OUT/manual/<assignment>-<ID>.html and .csv per question; returns the paths written."""
    with _book(out) as book:
        found = sheets(book)
    folder = Path(out) / "manual"
    folder.mkdir(parents=True, exist_ok=True)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["points"] = lambda value: f"{value:g}"
    template = env.from_string(TEMPLATE.read_text(encoding="utf-8"))
    written = []
    for sheet in found:
        stem = f"{sheet.assignment}-{sheet.question.id}"
        csv_path, html_path = folder / f"{stem}.csv", folder / f"{stem}.html"
        csv_path.write_text(_csv_text(sheet), encoding="utf-8")
        html_path.write_text(template.render(assignment=sheet.assignment, question=sheet.question,
                                             rows=sheet.rows, csv_name=csv_path.name), encoding="utf-8")
        written += [html_path, csv_path]
    return written


def _csv_text(sheet: Sheet) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    criteria = [f"c{i} (max {c.points:g})" for i, c in enumerate(sheet.question.criteria, start=1)]
    writer.writerow([*FIXED, *criteria, "comment"])
    for row in sheet.rows:
        writer.writerow([safe_cell(row["submission"]), sheet.assignment, sheet.question.id, row["answer_id"],
                         safe_cell(row["answer"]), *row["scores"], safe_cell(row["comment"])])
    return buffer.getvalue()


def import_sheet(out: Path, sheet_path: Path) -> list[str]:
    """Validate the sheet, then store its scores in the gradebook; returns the submissions whose scores changed.
    Nothing else is written: autograder.cohort.publish writes the files from the gradebook."""
    try:
        text = Path(sheet_path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManualError(f"{sheet_path} cannot be read as UTF-8 text ({exc}): give the CSV that "
                          "`manual export` wrote, saved as CSV UTF-8") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header or any(column not in header for column in ("submission", "assignment", "question", "answer_id",
                                                             "comment")):
        raise ManualError(f"{sheet_path}: the first row must be the sheet's header (submission, assignment, "
                          "question, answer_id, answer, c1 ..., comment): export the sheet again")
    criteria_columns = [i for i, name in enumerate(header) if name.split(" ", 1)[0][:1] == "c"
                        and name.split(" ", 1)[0][1:].isdigit()]
    with _book(out) as book:
        scores, errors = _validate(book, header, criteria_columns, list(reader), sheet_path)
        if errors:
            shown = errors[:MAX_ERRORS] + ([f"... and {len(errors) - MAX_ERRORS} more"] if len(errors) > MAX_ERRORS else [])
            raise ManualError(f"{sheet_path}: nothing imported, fix these rows and import again:\n  "
                              + "\n  ".join(shown))
        return store_manual(book, scores) if scores else []


def _validate(book: Gradebook, header: list[str], columns: list[int], rows: list[list[str]],
              sheet_path: Path) -> tuple[list[dict], list[str]]:
    at = {name: header.index(name) for name in ("submission", "assignment", "question", "answer_id", "comment")}
    graded = {row["name"] for row in book.rows() if row["status"] == "graded"}
    scores, errors, seen = [], [], set()
    for number, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        row = row + [""] * (len(header) - len(row))
        submission = row[at["submission"]].removeprefix("'")
        assignment, question_id = row[at["assignment"]].strip(), row[at["question"]].strip()
        where = f"row {number} ({submission[:60]!r}, {question_id[:20]!r})"
        values = [row[i].strip() for i in columns]
        if not any(values):
            continue  # not graded yet
        if submission not in graded:
            errors.append(f"{where}: no graded submission of that name in the gradebook")
            continue
        question = _questions(assignment).get(question_id) if assignment.isidentifier() else None
        if question is None:
            errors.append(f"{where}: {assignment[:40]!r} has no written question {question_id[:20]!r}")
            continue
        test = next((t for t in book.report(submission).tests if t.name == PREFIX + question.id
                     and t.assignment == assignment and t.status in ("manual", "hand_graded")), None)
        if test is None:
            errors.append(f"{where}: this submission has no answer to grade by hand for {question.id} "
                          "(none written, or not graded yet)")
            continue
        if row[at["answer_id"]].strip() != answer_digest(test.answer)[:16]:
            errors.append(f"{where}: the answer changed since this sheet was exported (the submission was graded "
                          "again): export the sheet again and grade the new answer")
            continue
        if (submission, question.id) in seen:
            errors.append(f"{where}: a second row for the same answer: keep one")
            continue
        seen.add((submission, question.id))
        criteria = _criteria(values, question, where, errors)
        if criteria is not None:
            scores.append({"submission": submission, "question": test.name, "criteria": criteria,
                           "comment": row[at["comment"]].strip(), "answer_sha": answer_digest(test.answer)})
    return scores, errors


def _criteria(values: list[str], question: Question, where: str, errors: list[str]) -> list[float] | None:
    wanted = len(question.criteria)
    if any(values[wanted:]):
        errors.append(f"{where}: {question.id} has {wanted} criteria; leave the columns after c{wanted} empty")
        return None
    result = []
    for index, (text, criterion) in enumerate(zip(values + [""] * wanted, question.criteria), start=1):
        try:
            value = float(text)
        except ValueError:
            errors.append(f"{where}: c{index} is {text[:20]!r}, not a number: give each criterion's points "
                          f"(0 to {criterion.points:g})")
            return None
        if not math.isfinite(value) or value < 0 or value > criterion.points:
            errors.append(f"{where}: c{index} is {text[:20]}, outside 0 to {criterion.points:g} (the criterion's "
                          "points)")
            return None
        result.append(value)
    return result
