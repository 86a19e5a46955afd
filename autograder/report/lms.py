"""The gradebook for a learning-management system: Canvas's gradebook CSV, and a plain CSV.

    python -m autograder export --format canvas OUT      # OUT/canvas.csv
    python -m autograder export --format csv OUT         # OUT/lms.csv

Both are written from the gradebook alone: one row per student of its roster, in the roster's order, with
the scores after the late policy and the course file's overrides (autograder.report.gradebook.finals).

Canvas, as its gradebook import reads a file: the header Student, ID, SIS User ID, SIS Login ID, Section,
then one column per assignment, "<name> (<id>)" where the course file's [export] canvas_ids gives Canvas's
id of it (Canvas matches the column by that id), else the plain name (Canvas matches it by title, or makes
a new assignment of that title). The next row is "Points Possible": each assignment's maximum, the one rule
of every view (autograder.report.parts: all its points but those of the tests that need a GPU while they are
not graded), so that Canvas's percentage is the one every other file shows.
Canvas finds a student by ID (its own user id, which a roster does not have: left empty), then SIS User ID
(the roster's id), SIS Login ID (the roster's login, else the email), then the name. A cell holds the final
score; "EX" where the assignment is excused (Canvas's mark for excused); 0 for a student with no submission.
Canvas reads an empty cell as "leave this grade as it is", and its current score leaves ungraded
assignments out, so an empty cell would keep a student who submitted nothing from losing anything; the
gradebook scores them 0, and so does the file. A submission that could not be graded (not gradable, or a
grader error) is no score: its cells stay empty, and the export says so. Submissions of no one on the
roster cannot be placed in Canvas: left out, and named.

The plain CSV: the roster's id, name, email and section, the submission's name and status, then for each
assignment its maximum, the points of it awaiting hand grading, the raw score, the penalised score (after
the late policy), the final score (after the course file's overrides; "excused" where excused) and the
percentage (the final score out of the maximum, as every view shows a score); then the same for the total,
excused assignments left out of it; and a note.

Both files are rewritten from the gradebook by every step that changes it (autograder.cohort.publish: a batch,
a regrade, `manual import`, `report`, an export), wherever they were written: the gradebook remembers each
file exported (`remember`), so no export is left holding an old grade. Submissions of no one on the roster follow the
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
PLAIN_PARTS = ("max", "awaiting hand grading", "raw", "penalised", "final", "percent")
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
    """{assignment: its maximum}, by name: the highest among the rows (they are all the same but where some
    submissions' GPU tests were graded and others' not yet, which _canvas_notes names)."""
    maxima: dict[str, float] = {}
    for mine in final.values():
        for name, f in mine.items():
            maxima[name] = max(maxima.get(name, 0.0), f.maximum)
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
    return _canvas_notes(placed, others, final, maxima)


def _canvas_cell(row: dict | None, final: dict[str, dict[str, Final]], adjusted: dict, assignment: str) -> str:
    """The final score, "EX" where excused, empty where nothing was graded."""
    mine = final.get(row["name"], {}) if row else {}
    if assignment in mine:
        return CANVAS_EXCUSED if mine[assignment].final is None else points(mine[assignment].final)
    override = adjusted.get(row["name"], {}).get(assignment, {}).get("override", {}) if row else {}
    return CANVAS_EXCUSED if override.get("value") == EXCUSED else ""


def _canvas_notes(placed: list[tuple[dict, dict | None]], others: list[dict], final: dict,
                  maxima: dict[str, float]) -> list[str]:
    notes = []
    if others:
        notes.append(f"left out, not on the roster (Canvas could not place them): {', '.join(r['name'] for r in others)}")
    empty = [f"{s['id']} ({row['status'] if row else 'no row'})" for s, row in placed
             if row is None or row["status"] not in SCORED]
    if empty:
        notes.append(f"left empty, not graded (Canvas keeps what it has; never a 0): {', '.join(empty)}")
    waiting = [s["id"] for s, row in placed if row and any(f.by_hand for f in final.get(row["name"], {}).values())]
    if waiting:
        notes.append(f"{len(waiting)} student(s) with written answers awaiting hand grading, 0 until graded "
                     f"(`manual export`): {', '.join(waiting)}")
    short = [s["id"] for s, row in placed if row and any(f.maximum < maxima[a] for a, f in final.get(row["name"], {}).items())]
    if short:
        notes.append(f"{len(short)} student(s) whose tests needing a GPU are not graded yet while others' are (grade "
                     f"them on a GPU node: `batch --regrade`): {', '.join(short)}")
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
    """Each assignment's max, awaiting hand grading, raw, penalised, final and percent; then the same for the total."""
    if mine is None:
        return [""] * len(PLAIN_PARTS) * (len(names) + 1)
    cells, total = [], [0.0] * 5
    for name in names:
        f = mine.get(name)
        if f is None:
            cells += [""] * len(PLAIN_PARTS)
            continue
        cells += [f.maximum, f.by_hand, f.raw, f.penalised, EXCUSED if f.final is None else f.final,
                  _percent(f.final, f.maximum)]
        if f.final is not None:
            total = [a + b for a, b in zip(total, (f.maximum, f.by_hand, f.raw, f.penalised, f.final))]
    return [*cells, *(rounded(v) for v in total), _percent(total[4], total[0])]


def _percent(score: float | None, maximum: float) -> float | str:
    return "" if score is None or not maximum else rounded(100 * score / maximum)


def remember(book: Gradebook, path: Path, fmt: str, canvas_ids: dict[str, int] | None = None) -> None:
    """Keep in the gradebook that `path` was exported in format `fmt`, so that every later step rewrites it."""
    import json

    with book._transaction() as db:
        db.execute("INSERT OR REPLACE INTO exports VALUES (?, ?, ?)",
                   (str(Path(path).resolve()), fmt, json.dumps({"canvas_ids": canvas_ids or {}})))


def rewrite(book: Gradebook, canvas_ids: dict[str, int] | None = None) -> list[str]:
    """Write again every file exported from this gradebook (`remember`), with `canvas_ids` where given (the
    course file's), else those it was written with. Returns what could not be written, and why: the files
    are derived, so a file that cannot be written costs nothing of the gradebook."""
    import json

    failed = []
    for path, fmt, options in book._db.execute("SELECT path, format, options FROM exports ORDER BY path").fetchall():
        try:
            if fmt == "canvas":
                ids = canvas_ids if canvas_ids is not None else json.loads(options).get("canvas_ids", {})
                write_canvas(book, Path(path), ids)
            else:
                write_plain(book, Path(path))
        except (OSError, LmsError) as exc:
            failed.append(f"{path} ({type(exc).__name__}: {exc})")
    return failed


def _reason(row: dict | None) -> str:
    """Why a row has no score (its message's last line); empty for a scored row."""
    if row is None or row["status"] in SCORED:
        return ""
    lines = [line.strip() for line in row["message"].splitlines() if line.strip()]
    return lines[-1] if lines else ""
