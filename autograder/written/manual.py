"""Grading written answers by hand: grading sheets out of the gradebook, scores back into it.

    python -m autograder manual export OUT [--anonymous]   # OUT/manual/<assignment>-<ID>.html and .csv
    python -m autograder manual import OUT SHEET.csv       # scores and comments into OUT/gradebook.sqlite

`export` writes, per question with answers to grade, a static HTML page (each submission's answer,
escaped, beside the rubric) and the same as CSV: a row per submission, a column per rubric criterion
(`c1 (max 1): <the criterion's words>`, ...) and a `comment`. Identical answers (the same words, whatever the
spacing and case) are next to each other, and the page says how many share each one, so a grader scores one and
copies its row. Scores already given are filled in. Cells that a spreadsheet would run as a formula (starting
with =, +, -, @, a tab or a carriage return) are prefixed with `'`.

Every row is keyed by an opaque id (`s-` and 12 hex digits): an HMAC of the submission's name under a key
kept in the gradebook, so it is the same in every export of that gradebook and cannot be made from the
name without the key. The name is shown for reading only and never read back, so a spreadsheet that
alters a name (`'bob` read as bob, a leading space trimmed) cannot move a score to another row. With
`--anonymous` the sheets show the ids alone, rows in id order, and the gradebook remembers the choice for
the sheets written again after an import.

`import` validates the whole sheet first (every column the export wrote present; a known id and question;
an answer still the one exported; every criterion a number from 0 to its maximum; a row whose criteria
are all blank is skipped, and so is one only partly filled in, which is said: it is still being graded) and
writes nothing when any row is wrong; then stores the scores in one transaction
(a re-import replaces the earlier scores of the same answers, never adds to them). A comment is stored as
the grader wrote it: the `'` the export put before a formula character is removed. The command then writes
every file again from the gradebook (autograder.cohort.publish): the reports, grades.csv, these sheets and
the cohort report.
"""

from __future__ import annotations

import csv
import functools
import hmac
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from autograder.report.text import from_cell, safe_cell
from autograder.report.gradebook import (Gradebook, answer_digest, manual_scores, sheet_settings,
                                         store_manual)
from autograder.written.answers import PREFIX, Question, handout_questions

TEMPLATE = Path(__file__).with_name("sheet.html.j2")
FIXED = ("id", "submission", "assignment", "question", "answer_id", "answer")  # then c1 ..., comment
SHOWN_ONLY = "submission"  # for reading: import never reads it, an anonymous sheet has none
CRITERION = re.compile(r"c(\d+)(?: \(max [^)]*\))?(?::.*)?", re.S)  # the words after ":" are for reading only
CRITERION_WORDS = 60  # characters of a criterion's words in its column's header
MAX_ERRORS = 20
AGAIN = ("export the sheet again (`python -m autograder manual export OUT`) and copy the scores and comments "
         "into it")


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


def row_ids(book: Gradebook) -> dict[str, str]:
    """{submission name: its sheet id} for every submission in the gradebook. The `s-` keeps a spreadsheet
    from reading an id as a number."""
    key = sheet_settings(book)[0]
    ids = {row["name"]: "s-" + hmac.new(key, row["name"].encode("utf-8", "surrogatepass"), "sha256").hexdigest()[:12]
           for row in book.rows()}
    if len(set(ids.values())) < len(ids):
        raise ManualError(f"{book.path}: two submissions got the same sheet id; grade the cohort into a new --out "
                          "folder (a new gradebook gets a new key)")
    return ids


def sheets(book: Gradebook) -> list[Sheet]:
    """Per question, the submissions whose answer awaits (or got) a hand score, by submission name."""
    ids = row_ids(book)
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
            sheet.rows.append({"id": ids[row["name"]], "submission": row["name"], "answer": test.answer,
                               "answer_id": answer_digest(test.answer)[:16], "scores": scores,
                               "comment": current["comment"] if current else ""})
    return [found[key] for key in sorted(found)]


def _same(answer: str) -> str:
    """An answer as grouping compares it: its words, without case."""
    return " ".join(answer.casefold().split())


def grouped(rows: list[dict], key: str) -> list[dict]:
    """The rows with identical answers next to each other (groups in the order of their first row by `key`),
    each row given `shared`: how many rows hold its answer."""
    order: dict[str, int] = {}
    for row in sorted(rows, key=lambda r: r[key]):
        order.setdefault(_same(row["answer"]), len(order))
    counts = {answer: sum(_same(r["answer"]) == answer for r in rows) for answer in order}
    return [{**row, "shared": counts[_same(row["answer"])]}
            for row in sorted(rows, key=lambda r: (order[_same(r["answer"])], r[key]))]


def export(out: Path, anonymous: bool | None = None) -> list[Path]:
    """Write OUT/manual/<assignment>-<ID>.html and .csv per question; returns the paths written. `anonymous`:
    show ids, never names (None: as the last export of this gradebook did)."""
    with _book(out) as book:
        anonymous = sheet_settings(book, anonymous)[1]
        found = sheets(book)
    folder = Path(out) / "manual"
    folder.mkdir(parents=True, exist_ok=True)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["points"] = lambda value: f"{value:g}"
    template = env.from_string(TEMPLATE.read_text(encoding="utf-8"))
    columns = [c for c in FIXED if not (anonymous and c == SHOWN_ONLY)]
    written = []
    for sheet in found:
        rows = grouped(sheet.rows, "submission")
        if anonymous:  # nothing of the name reaches the files, not even its place in alphabetical order
            rows = grouped([{k: v for k, v in row.items() if k != SHOWN_ONLY} for row in sheet.rows], "id")
        stem = f"{sheet.assignment}-{sheet.question.id}"
        csv_path, html_path = folder / f"{stem}.csv", folder / f"{stem}.html"
        csv_path.write_text(_csv_text(sheet, rows, columns), encoding="utf-8")
        html_path.write_text(template.render(assignment=sheet.assignment, question=sheet.question, rows=rows,
                                             anonymous=anonymous, csv_name=csv_path.name), encoding="utf-8")
        written += [html_path, csv_path]
    return written


def _csv_text(sheet: Sheet, rows: list[dict], columns: list[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    criteria = [f"c{i} (max {c.points:g}): {_words(c.text)}" for i, c in enumerate(sheet.question.criteria, start=1)]
    writer.writerow([*columns, *criteria, "comment"])
    for row in rows:
        cells = {**row, "assignment": sheet.assignment, "question": sheet.question.id}
        writer.writerow([safe_cell(cells[c]) for c in columns] + [*row["scores"], safe_cell(row["comment"])])
    return buffer.getvalue()


def _words(text: str) -> str:
    """A criterion's words on one line, cut to fit a column's header."""
    text = " ".join(text.split())
    return text if len(text) <= CRITERION_WORDS else text[: CRITERION_WORDS - 3] + "..."


def import_sheet(out: Path, sheet_path: Path, notes: list[str] | None = None) -> list[str]:
    """Validate the sheet, then store its scores in the gradebook; returns the submissions whose scores changed.
    `notes` gets the rows left for later (partly filled in). Nothing else is written: autograder.cohort.publish
    writes the files from the gradebook."""
    try:
        text = Path(sheet_path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManualError(f"{sheet_path} cannot be read as UTF-8 text ({exc}): give the CSV that "
                          "`manual export` wrote, saved as CSV UTF-8") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = [name.strip() for name in next(reader, [])]
    at, criteria = _columns(header, sheet_path)
    with _book(out) as book:
        scores, errors = _validate(book, at, criteria, len(header), list(reader), sheet_path,
                                   notes if notes is not None else [])
        if errors:
            shown = errors[:MAX_ERRORS] + ([f"... and {len(errors) - MAX_ERRORS} more"] if len(errors) > MAX_ERRORS else [])
            raise ManualError(f"{sheet_path}: nothing imported, fix these rows and import again:\n  "
                              + "\n  ".join(shown))
        return store_manual(book, scores) if scores else []


def _columns(header: list[str], sheet_path: Path) -> tuple[dict[str, int], dict[int, int]]:
    """{column name: index} of the columns import reads, and {criterion number: index}; a sheet that lacks one
    (a column deleted or renamed) or has one twice is refused."""
    needed = [c for c in FIXED if c != SHOWN_ONLY] + ["comment"]
    missing = [c for c in needed if c not in header]
    if missing:
        raise ManualError(f"{sheet_path}: no column {', '.join(map(repr, missing))} in the first row: import needs "
                          f"every column `manual export` wrote, its header unchanged (a deleted or renamed column "
                          f"cannot be told apart from a moved one); put it back, or {AGAIN}")
    keys = [name for name in header if name in needed or CRITERION.fullmatch(name)]
    twice = sorted({name for name in keys if keys.count(name) > 1})
    if twice:
        raise ManualError(f"{sheet_path}: the column {', '.join(map(repr, twice))} appears twice: keep one, or {AGAIN}")
    criteria = {int(m.group(1)): i for i, m in enumerate(map(CRITERION.fullmatch, header)) if m}
    return {name: header.index(name) for name in needed}, criteria


def _validate(book: Gradebook, at: dict[str, int], criteria: dict[int, int], width: int, rows: list[list[str]],
              sheet_path: Path, notes: list[str]) -> tuple[list[dict], list[str]]:
    names = {sheet_id: name for name, sheet_id in row_ids(book).items()}
    graded = {row["name"] for row in book.rows() if row["status"] == "graded"}
    scores, errors, seen = [], [], set()
    for number, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        row = row + [""] * (width - len(row))
        sheet_id = row[at["id"]].strip()
        assignment, question_id = row[at["assignment"]].strip(), row[at["question"]].strip()
        where = f"row {number} (id {sheet_id[:20]!r}, {question_id[:20]!r})"
        submission = names.get(sheet_id)
        if submission is None:
            errors.append(f"{where}: no submission has this id in this gradebook (a row added or an id edited by "
                          "hand, or a sheet of another batch output): give each row the id `manual export` wrote")
            continue
        question = _questions(assignment).get(question_id) if assignment.isidentifier() else None
        if question is None:
            errors.append(f"{where}: {assignment[:40]!r} has no written question {question_id[:20]!r}")
            continue
        _require_criteria(question, criteria, sheet_path)
        values = [row[criteria[n]].strip() for n in sorted(criteria)]
        if not any(values):
            continue  # not graded yet
        wanted = [row[criteria[n]].strip() for n in range(1, len(question.criteria) + 1)]
        if not all(wanted) and not any(v for n, v in zip(sorted(criteria), values) if n > len(question.criteria)):
            blank = [f"c{n}" for n, v in enumerate(wanted, start=1) if not v]
            notes.append(f"{where}: {', '.join(blank)} left blank: the row is still being graded, nothing of it is "
                         "stored yet; fill in every criterion (0 where it earns nothing) and import again")
            continue
        if submission not in graded:
            errors.append(f"{where}: this submission has no graded report now (its last grading failed): "
                          "grade it again, export the sheet again and grade its answer")
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
        given = _criteria({n: row[i].strip() for n, i in criteria.items()}, question, where, errors)
        if given is not None:
            scores.append({"submission": submission, "question": test.name, "criteria": given,
                           "comment": from_cell(row[at["comment"]].strip()).strip(),
                           "answer_sha": answer_digest(test.answer)})
    return scores, errors


def _require_criteria(question: Question, criteria: dict[int, int], sheet_path: Path) -> None:
    missing = [f"c{n}" for n in range(1, len(question.criteria) + 1) if n not in criteria]
    if missing:
        raise ManualError(f"{sheet_path}: {question.id} has {len(question.criteria)} rubric criteria but the sheet has "
                          f"no column {', '.join(missing)} (deleted or renamed): nothing imported; put the column "
                          f"back, or {AGAIN}")


def _criteria(values: dict[int, str], question: Question, where: str, errors: list[str]) -> list[float] | None:
    wanted = len(question.criteria)
    if any(text for n, text in values.items() if n > wanted):
        errors.append(f"{where}: {question.id} has {wanted} criteria; leave the columns after c{wanted} empty")
        return None
    result = []
    for index, criterion in enumerate(question.criteria, start=1):
        text = values[index]
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
