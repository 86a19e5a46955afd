"""The gradebook for a learning-management system: Canvas's gradebook CSV, and a plain CSV.

    python -m autograder export --format canvas OUT      # OUT/canvas.csv
    python -m autograder export --format csv OUT         # OUT/lms.csv

Both are written from the gradebook alone: one row per student of its roster, in the roster's order, with
the scores after the late policy and the course file's overrides (autograder.report.gradebook.finals).

Canvas, as its gradebook import reads a file: the header Student, ID, SIS User ID, SIS Login ID, Section,
then one column per assignment, "<name> (<id>)" where the course file's [export] canvas_ids gives Canvas's
id of it (Canvas matches the column by that id), else the plain name (Canvas matches it by title, or makes
a new assignment of that title). The next row is "Points Possible": each assignment's maximum in all.
Canvas finds a student by ID (its own user id, which a roster does not have: left empty), then SIS User ID
(the roster's id), SIS Login ID (the roster's login, else the email), then the name. A cell holds the final
score; "EX" where the assignment is excused (Canvas's mark for excused); 0 for a student with no submission.
Canvas reads an empty cell as "leave this grade as it is", and its current score leaves ungraded
assignments out, so an empty cell would keep a student who submitted nothing from losing anything; the
gradebook scores them 0, and so does the file. A submission that could not be graded (not gradable, or a
grader error) is no score: its cells stay empty, and the export says so. Submissions of no one on the
roster cannot be placed in Canvas: left out, and named.

The plain CSV: the roster's id, name, email and section, the submission's name and status, then for each
assignment its maximum in all ("max"), its maximum graded here, the raw score, the penalised score (after
the late policy), the final score (after the course file's overrides; "excused" where excused) and the
percentage (the final score out of the points graded here, as every view shows a score); then the same for
the total, excused assignments left out of it; and a note. Submissions of no one on the roster follow the
roster's students, noted "not on the roster"; without a roster, every submission is such a row.

Every cell that comes from a student or the roster goes through safe_cell: a name beginning with `=` is
written `'=...`, which a spreadsheet shows as text and never runs.
"""

from __future__ import annotations

import csv
from pathlib import Path

from autograder.report.gradebook import EXCUSED, MISSING, SCORED, Final, Gradebook, adjustments, finals, roster
from autograder.report.text import points, rounded, safe_cell

FILES = {"canvas": "canvas.csv", "csv": "lms.csv"}  # the default file of each format, in the batch's OUT
CANVAS_STUDENT = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS = "Points Possible"
CANVAS_EXCUSED = "EX"
PLAIN_PARTS = ("max", "max graded here", "raw", "penalised", "final", "percent")
NOT_ON_ROSTER = "not on the roster"


class LmsError(Exception):
    """The export cannot be written: the message says what is missing and what to do."""


def _placed(book: Gradebook) -> tuple[list[tuple[dict, dict | None]], list[dict]]:
    """(roster row, the gradebook row standing for the student) per student in the roster's order, and the
    rows of the submissions of no one on the roster."""
    rows = {row["name"]: row for row in book.rows()}
    placed = [(student, rows.get(student["submission"] or student["id"])) for student in roster(book)]
    taken = {row["name"] for _, row in placed if row is not None}
    return placed, [row for name, row in rows.items() if name not in taken and row["status"] != MISSING]


def _assignments(final: dict[str, dict[str, Final]]) -> dict[str, float]:
    """{assignment: its maximum in all}, by name."""
    maxima: dict[str, float] = {}
    for mine in final.values():
        for name, f in mine.items():
            maxima[name] = max(maxima.get(name, 0.0), f.total)
    return dict(sorted(maxima.items()))


def write_canvas(book: Gradebook, path: Path, canvas_ids: dict[str, int]) -> list[str]:
    """Canvas's gradebook CSV of the roster's students; returns notes for the instructor (who is left out or
    left empty, and why)."""
    placed, others = _placed(book)
    if not placed:
        raise LmsError("the Canvas export needs the roster (Canvas finds each student by the roster's id or "
                       "login): add [roster] to the course file (autograder/cohort/course.py shows it), then export "
                       "again")
    final, adjusted = finals(book), adjustments(book)
    maxima = _assignments(final)
    header = [f"{a} ({canvas_ids[a]})" if a in canvas_ids else a for a in maxima]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*CANVAS_STUDENT, *header])
        writer.writerow([CANVAS_POINTS, *[""] * (len(CANVAS_STUDENT) - 1), *(points(m) for m in maxima.values())])
        for student, row in placed:
            cells = [_canvas_cell(row, final, adjusted, name) for name in maxima]
            writer.writerow([safe_cell(student["name"]), "", safe_cell(student["id"]), safe_cell(student["login"]),
                             safe_cell(student["section"]), *cells])
    return _canvas_notes(placed, others, final)


def _canvas_cell(row: dict | None, final: dict[str, dict[str, Final]], adjusted: dict, assignment: str) -> str:
    """The final score, "EX" where excused, empty where nothing was graded."""
    mine = final.get(row["name"], {}) if row else {}
    if assignment in mine:
        return CANVAS_EXCUSED if mine[assignment].final is None else points(mine[assignment].final)
    override = adjusted.get(row["name"], {}).get(assignment, {}).get("override", {}) if row else {}
    return CANVAS_EXCUSED if override.get("value") == EXCUSED else ""


def _canvas_notes(placed: list[tuple[dict, dict | None]], others: list[dict], final: dict) -> list[str]:
    notes = []
    if others:
        notes.append(f"left out, not on the roster (Canvas could not place them): {', '.join(r['name'] for r in others)}")
    empty = [f"{s['id']} ({row['status'] if row else 'no row'})" for s, row in placed
             if row is None or row["status"] not in SCORED]
    if empty:
        notes.append(f"left empty, not graded (Canvas keeps what it has; never a 0): {', '.join(empty)}")
    waiting = [s["id"] for s, row in placed if row and any(f.graded < f.total for f in final.get(row["name"], {}).values())]
    if waiting:
        notes.append(f"{len(waiting)} student(s) with points not graded yet (awaiting hand grading, or needing a GPU), "
                     f"which count as 0 of the maximum in all: {', '.join(waiting)}")
    return notes


def write_plain(book: Gradebook, path: Path) -> list[str]:
    """The plain CSV (the module's docstring lists its columns); returns notes for the instructor."""
    placed, others = _placed(book)
    final = finals(book)
    names = list(_assignments(final))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "name", "email", "section", "submission", "status",
                         *(f"{a} {part}" for a in [*names, "total"] for part in PLAIN_PARTS), "note"])
        for student, row in [*placed, *((None, row) for row in others)]:
            who = [safe_cell(student[k]) for k in ("id", "name", "email", "section")] if student else [""] * 4
            status = [safe_cell(row["name"]), row["status"]] if row else ["", "no row"]
            note = NOT_ON_ROSTER if student is None and placed else _reason(row)
            writer.writerow([*who, *status, *_plain_cells(final.get(row["name"]) if row else None, names),
                             safe_cell(note)])
    return [f"{NOT_ON_ROSTER}: {', '.join(row['name'] for row in others)}"] if others and placed else []


def _plain_cells(mine: dict[str, Final] | None, names: list[str]) -> list:
    """Each assignment's max, max graded here, raw, penalised, final and percent; then the same for the total."""
    if mine is None:
        return [""] * len(PLAIN_PARTS) * (len(names) + 1)
    cells, total = [], [0.0] * 5
    for name in names:
        f = mine.get(name)
        if f is None:
            cells += [""] * len(PLAIN_PARTS)
            continue
        cells += [f.total, f.graded, f.raw, f.penalised, EXCUSED if f.final is None else f.final, _percent(f.final, f.graded)]
        if f.final is not None:
            total = [a + b for a, b in zip(total, (f.total, f.graded, f.raw, f.penalised, f.final))]
    return [*cells, *(rounded(v) for v in total), _percent(total[4], total[1])]


def _percent(score: float | None, graded: float) -> float | str:
    return "" if score is None or not graded else rounded(100 * score / graded)


def _reason(row: dict | None) -> str:
    """Why a row has no score (its message's last line); empty for a scored row."""
    if row is None or row["status"] in SCORED:
        return ""
    lines = [line.strip() for line in row["message"].splitlines() if line.strip()]
    return lines[-1] if lines else ""
