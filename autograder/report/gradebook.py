"""The cohort's gradebook: one SQLite file, one row per submission, one row per test.

Crash safety: the database is in WAL mode and each submission is recorded in one transaction
(its old rows deleted, its new rows inserted, committed), so killing the process at any moment
loses at most the submission being recorded, and nothing is ever counted twice. A submission
recorded with status "error" (the grader failed on it) is not current, so the next batch grades it again;
one recorded "not_gradable" (nothing of it could be graded: a corrupt zip, an empty folder) is current
until its contents change, and has no score: it is never a 0. A student of the roster with no submission has
a row of status "missing" (score 0), named by the student's id (autograder.cohort.roster keeps them).

Every file a reader sees is derived from this gradebook (autograder.cohort.publish): the scores after the
late policy are computed from the raw scores and the stored penalties when read (`late()`), never kept.

Use one Gradebook from one thread: sqlite3 refuses a connection used from another thread, which
keeps the batch's rule (only the main thread writes) enforced rather than merely followed.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, NamedTuple

from autograder.report.parts import COLUMNS as PART_COLUMNS, Parts, after_penalty, by_assignment
from autograder.report.text import clean, rounded, safe_cell
from autograder.model.results import GradeReport

SUBMISSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS {table} (
    name        TEXT PRIMARY KEY,
    digest      TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('graded', 'error', 'not_gradable', 'missing')),
    score       REAL,
    max_score   REAL,
    assignments TEXT NOT NULL,  -- JSON {assignment: [score, max_score]}
    message     TEXT NOT NULL,
    graded_at   TEXT NOT NULL,  -- ISO 8601, UTC
    report      TEXT            -- GradeReport.to_json(), the lossless form
);
"""
SCHEMA = SUBMISSIONS_TABLE.replace("{table}", "submissions") + """
CREATE TABLE IF NOT EXISTS tests (
    submission  TEXT NOT NULL REFERENCES submissions (name),
    position    INTEGER NOT NULL,
    name        TEXT NOT NULL,
    assignment  TEXT NOT NULL,
    status      TEXT NOT NULL,
    points      REAL NOT NULL,
    max_points  REAL NOT NULL,
    visibility  TEXT NOT NULL,
    message     TEXT NOT NULL,
    PRIMARY KEY (submission, position)
);
-- The late policy's outcome per submission and assignment (autograder.cohort.late), recomputed by each batch.
-- A gradebook made before this table existed gets it when opened; its rows are kept as they are.
CREATE TABLE IF NOT EXISTS late (
    submission     TEXT NOT NULL,
    assignment     TEXT NOT NULL,
    submitted_at   TEXT,           -- ISO 8601 with offset; NULL: no time known, treated as on time
    due            TEXT NOT NULL,
    days_late      INTEGER NOT NULL,
    late_days_used INTEGER NOT NULL,
    penalty        REAL NOT NULL,  -- the fraction of the score removed
    score          REAL NOT NULL,  -- raw, when assessed; late() reads the current score instead
    max_score      REAL NOT NULL,
    penalised      REAL NOT NULL,  -- likewise recomputed by late() from the current score
    note           TEXT NOT NULL,
    PRIMARY KEY (submission, assignment)
);
"""
COLUMNS = ("name", "digest", "status", "score", "max_score", "assignments", "message", "graded_at")
CURRENT = ("graded", "not_gradable")  # statuses a batch does not grade again while the contents are unchanged


class Gradebook:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: transactions are begun and committed explicitly in _transaction().
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA + ROSTER_SCHEMA)
        _allow_not_gradable(self._db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Gradebook":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def is_current(self, name: str, digest: str) -> bool:
        """True when `name` was graded, or found not gradable, from exactly these contents (not an error)."""
        row = self._db.execute("SELECT digest, status FROM submissions WHERE name = ?", (name,)).fetchone()
        return row is not None and row[0] == digest and row[1] in CURRENT

    def record(self, name: str, digest: str, report: GradeReport) -> None:
        """Store a graded submission, replacing whatever was stored under `name`. Its message says how
        many of the maximum points were not graded on this machine (GPU-only tests). A report that says
        the submission is not gradable is stored as such, with its reason and no score."""
        if report.not_gradable:
            with self._transaction() as db:
                self._replace(db, name, digest, "not_gradable", None, None, {}, clean(report.not_gradable),
                              report.to_json())
            return
        groups = {a: [sum(t.points for t in ts), sum(t.max_points for t in ts)]
                  for a, ts in report.by_assignment().items()}
        tests = [(name, i, clean(t.name), t.assignment, t.status, t.points, t.max_points, t.visibility,
                  clean(t.message)) for i, t in enumerate(report.tests)]
        waiting = sum(t.max_points for t in report.tests if t.status == "not_graded")
        note = f"{waiting:g} GPU points not graded" if waiting else ""
        with self._transaction() as db:
            self._replace(db, name, digest, "graded", report.score, report.max_score, groups, note,
                          report.to_json())
            db.executemany("INSERT INTO tests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", tests)
            _apply_manual(db, name)  # scores given by hand to these very answers earlier

    def record_error(self, name: str, digest: str, message: str) -> None:
        """Store a submission that could not be graded; it is graded again by the next batch."""
        with self._transaction() as db:
            self._replace(db, name, digest, "error", None, None, {}, clean(message), None)

    def _replace(self, db: sqlite3.Connection, name: str, digest: str, status: str, score, max_score,
                 groups: dict, message: str, report: str | None) -> None:
        graded_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        db.execute("DELETE FROM tests WHERE submission = ?", (name,))
        db.execute("DELETE FROM submissions WHERE name = ?", (name,))
        db.execute("INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (name, digest, status, score, max_score, json.dumps(groups), message, graded_at, report))

    def rows(self) -> list[dict]:
        """One dict per submission, by name; `assignments` maps assignment -> [score, max_score] (the maximum in
        all), `parts` assignment -> the score and the parts of its maximum (autograder.report.parts)."""
        found = self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM submissions ORDER BY name").fetchall()
        rows = [dict(zip(COLUMNS, row)) for row in found]
        tests: dict[str, list[dict]] = {}
        cursor = self._db.execute("SELECT submission, assignment, status, points, max_points FROM tests "
                                  "ORDER BY submission, position")
        for submission, assignment, status, got, most in cursor:
            tests.setdefault(submission, []).append(
                {"assignment": assignment, "status": status, "points": got, "max_points": most})
        for row in rows:
            row["assignments"] = json.loads(row["assignments"])
            # {assignment: Parts}; a row stored without its tests counts its maximum as graded
            row["parts"] = by_assignment(tests.get(row["name"], [])) or {
                a: Parts(pair[0], pair[1], 0.0, 0.0) for a, pair in row["assignments"].items()}
        return rows

    def tests(self, name: str) -> list[dict]:
        """The per-test rows of one submission, in the report's order."""
        cursor = self._db.execute("SELECT * FROM tests WHERE submission = ? ORDER BY position", (name,))
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]

    def report(self, name: str) -> GradeReport | None:
        """The stored lossless report of a graded submission (None if absent or an error)."""
        row = self._db.execute("SELECT report FROM submissions WHERE name = ?", (name,)).fetchone()
        return GradeReport.from_json(row[0]) if row and row[0] else None

    def record_late(self, entries) -> None:
        """Replace the late policy's rows with `entries` (autograder.cohort.late.Lateness), in one transaction."""
        rows = [(e.student, e.assignment, e.submitted.isoformat() if e.submitted else None, e.due.isoformat(),
                 e.days_late, e.late_days_used, e.penalty, e.score, e.max_score, e.penalised, clean(e.note))
                for e in entries]
        with self._transaction() as db:
            db.execute("DELETE FROM late")
            db.executemany("INSERT INTO late VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def late(self) -> dict[str, dict[str, dict]]:
        """{submission: {assignment: the late policy's row}}; empty when no late policy was applied. The
        penalty and the days late are the policy's as assessed; the score is the current raw score (a
        regrade or a hand grade since changes it) and `penalised` is computed from it now, rounded as
        every file shows it. Rows of submissions or assignments no longer graded are left out."""
        cursor = self._db.execute("SELECT * FROM late ORDER BY submission, assignment")
        names = [column[0] for column in cursor.description]
        current = {row["name"]: row["parts"] for row in self.rows() if row["status"] == "graded"}
        found: dict[str, dict[str, dict]] = {}
        for values in cursor.fetchall():
            row = dict(zip(names, values))
            parts = current.get(row["submission"], {}).get(row["assignment"])
            if parts is None:
                continue
            row.update(score=rounded(parts.score), max_score=rounded(parts.graded),
                       penalised=after_penalty(parts.score, row["penalty"]))
            found.setdefault(row["submission"], {})[row["assignment"]] = row
        return found

    def parts(self, name: str) -> dict[str, Parts]:
        """{assignment: the parts of its maximum and the score (autograder.report.parts)} of one submission."""
        return by_assignment(self.tests(name))

    def export_csv(self, path: Path) -> None:
        """One row per submission: its name; per assignment the score and the parts of its maximum (graded
        here, awaiting hand grading, needing a GPU, the maximum in all); the same for the total; the status
        and, for a submission not graded, why. Where a late policy was applied, then per assignment the
        penalised score (the raw one where no policy applies) and the days late, and the penalised total,
        which is the sum of the penalised scores shown. Where the course file overrides or excuses an
        assignment, then per assignment its final score ("excused" where excused) and the final total, the sum
        of the others. A student of the roster with no submission has a row of status "missing", scoring 0.
        Every number is rounded as the other files show it."""
        rows = self.rows()
        parts = {row["name"]: row["parts"] for row in rows}
        assignments = sorted({a for row in rows for a in row["assignments"]} | {a for p in parts.values() for a in p})
        late, final = self.late(), finals(self)
        adjusted = any(f.adjusted for mine in final.values() for f in mine.values())
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            extra = [*(f"{a} penalised" for a in assignments), "total penalised",
                     *(f"{a} days late" for a in assignments)] if late else []
            extra += [*(f"{a} final" for a in assignments), "total final"] if adjusted else []
            header = ["name"] + [c for a in assignments for c in _part_columns(a)] + _part_columns("total")
            writer.writerow([*header, "status", "reason", *extra])
            for row in rows:
                mine, scored = parts[row["name"]], row["status"] in SCORED
                cells = [c for a in assignments for c in _part_cells(mine.get(a) if scored else None)]
                cells += _part_cells(sum(mine.values(), Parts(0.0, 0.0, 0.0, 0.0)) if scored else None)
                writer.writerow([safe_cell(row["name"]), *cells, row["status"],
                                 "" if row["status"] == "graded" else safe_cell(_last_line(row["message"])),
                                 *(_penalised(row, mine, assignments, late) if late else []),
                                 *(_final_cells(final.get(row["name"]), assignments) if adjusted else [])])


def _part_columns(assignment: str) -> list[str]:
    """`alpha`, `alpha max graded here`, ... `alpha max` (the total: `total`, `max graded here`, ... `max`)."""
    prefix = "" if assignment == "total" else f"{assignment} "
    return [assignment] + [prefix + title for title in PART_COLUMNS.values()]


def _part_cells(parts: Parts | None) -> list:
    if parts is None:
        return [""] * (1 + len(PART_COLUMNS))
    return [rounded(parts.score)] + [rounded(getattr(parts, name)) for name in PART_COLUMNS]


def _last_line(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _penalised(row: dict, parts: dict[str, Parts], assignments: list[str], late: dict) -> list:
    """Each assignment's penalised score (the raw one where no policy applies), their sum, each one's days late."""
    mine = late.get(row["name"], {})
    if row["status"] not in SCORED:
        return [""] * (2 * len(assignments) + 1)
    scores = [mine[a]["penalised"] if a in mine else rounded(parts[a].score) if a in parts else "" for a in assignments]
    days = [mine[a]["days_late"] if a in mine else "" for a in assignments]
    return [*scores, rounded(sum(v for v in scores if v != "")), *days]


def _blank(value):
    return "" if value is None else value


def _allow_not_gradable(db: sqlite3.Connection) -> None:
    """A gradebook made before "not_gradable" (or "missing") existed gets it in its status check, its rows kept
    as they are (SQLite cannot change a check in place: the table is copied into one made by today's schema)."""
    found = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'submissions'").fetchone()
    if found is None or all(f"'{status}'" in found[0] for status in ("not_gradable", MISSING)):
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(SUBMISSIONS_TABLE.replace("{table}", "submissions_new"))
        db.execute("INSERT INTO submissions_new SELECT * FROM submissions")
        db.execute("DROP TABLE submissions")
        db.execute("ALTER TABLE submissions_new RENAME TO submissions")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


# ---- written answers graded by hand (autograder/written/manual.py imports the grading sheets) --------------

MANUAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS manual_scores (
    submission  TEXT NOT NULL,
    question    TEXT NOT NULL,  -- the result's name, e.g. written/W1
    criteria    TEXT NOT NULL,  -- JSON [points per rubric criterion]
    points      REAL NOT NULL,
    comment     TEXT NOT NULL,
    answer_sha  TEXT NOT NULL,  -- sha256 of the answer graded: a changed answer is not scored by it
    graded_at   TEXT NOT NULL,
    PRIMARY KEY (submission, question)
);
"""


MANUAL_SHEETS_SCHEMA = """
CREATE TABLE IF NOT EXISTS manual_sheets (
    one        INTEGER PRIMARY KEY CHECK (one = 1),  -- a single row
    secret     TEXT NOT NULL,     -- hex key of the sheets' row ids, made at the first export and kept
    anonymous  INTEGER NOT NULL   -- 1: the sheets show graders those ids, never a submission's name
);
"""


def sheet_settings(book: Gradebook, anonymous: bool | None = None) -> tuple[bytes, bool]:
    """The key of the grading sheets' row ids (autograder.written.manual) and whether the sheets are anonymous.
    The key is made once per gradebook, so a submission's id is the same in every sheet written from it;
    `anonymous` given is stored, and the sheets written again later (autograder.cohort.publish) follow it."""
    import secrets

    book._db.execute(MANUAL_SHEETS_SCHEMA)
    with book._transaction() as db:
        db.execute("INSERT OR IGNORE INTO manual_sheets VALUES (1, ?, 0)", (secrets.token_hex(32),))
        if anonymous is not None:
            db.execute("UPDATE manual_sheets SET anonymous = ?", (int(anonymous),))
        secret, stored = db.execute("SELECT secret, anonymous FROM manual_sheets").fetchone()
    return bytes.fromhex(secret), bool(stored)


def answer_digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _manual_table(db: sqlite3.Connection) -> None:
    db.execute(MANUAL_SCHEMA)


def store_manual(book: Gradebook, scores: list[dict]) -> list[str]:
    """Store hand-given scores, each {submission, question, criteria, comment, answer_sha}, replacing earlier
    ones for the same answer, and apply them to the stored reports, all in one transaction; returns the
    submissions changed."""
    _manual_table(book._db)
    graded_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    names = sorted({s["submission"] for s in scores})
    with book._transaction() as db:
        db.executemany("INSERT OR REPLACE INTO manual_scores VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [(s["submission"], s["question"], json.dumps(s["criteria"]), float(sum(s["criteria"])),
                         s["comment"], s["answer_sha"], graded_at) for s in scores])
        for name in names:
            _apply_manual(db, name)
    return names


def manual_scores(book: Gradebook, name: str) -> dict[str, dict]:
    """{question: {criteria, points, comment, answer_sha}} stored for one submission."""
    _manual_table(book._db)
    cursor = book._db.execute("SELECT question, criteria, points, comment, answer_sha FROM manual_scores "
                              "WHERE submission = ?", (name,))
    return {q: {"criteria": json.loads(c), "points": p, "comment": m, "answer_sha": a} for q, c, p, m, a in cursor}


def _apply_manual(db: sqlite3.Connection, name: str) -> None:
    """Put the stored hand scores of `name` into its report, its test rows and its totals (inside the
    caller's transaction). A score applies only to the very answer it was given for."""
    _manual_table(db)
    row = db.execute("SELECT report FROM submissions WHERE name = ? AND status = 'graded'", (name,)).fetchone()
    stored = {q: (p, m, a) for q, p, m, a in db.execute(
        "SELECT question, points, comment, answer_sha FROM manual_scores WHERE submission = ?", (name,))}
    if not row or not row[0] or not stored:
        return
    report = GradeReport.from_json(row[0])
    changed = False
    for position, test in enumerate(report.tests):
        found = stored.get(test.name)
        if test.status not in ("manual", "hand_graded") or not found or found[2] != answer_digest(test.answer):
            continue
        test.status, test.points = "hand_graded", min(max(found[0], 0.0), test.max_points)
        test.message = f"graded by hand: {found[0]:g} / {test.max_points:g}" + (f"\n{found[1]}" if found[1] else "")
        db.execute("UPDATE tests SET status = ?, points = ?, message = ? WHERE submission = ? AND position = ?",
                   (test.status, test.points, clean(test.message), name, position))
        changed = True
    if changed:
        groups = {a: [sum(t.points for t in ts), sum(t.max_points for t in ts)] for a, ts in report.by_assignment().items()}
        db.execute("UPDATE submissions SET score = ?, assignments = ?, report = ? WHERE name = ?",
                   (report.score, json.dumps(groups), report.to_json(), name))

# ---- the roster, extensions and overrides (autograder.cohort.roster brings them from the course file) -------

ROSTER_SCHEMA = """
-- The course file's roster, as the last batch or export matched the submissions to it.
CREATE TABLE IF NOT EXISTS roster (
    position    INTEGER NOT NULL,  -- the roster's order
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    email       TEXT NOT NULL,
    section     TEXT NOT NULL,
    login       TEXT NOT NULL,     -- Canvas's SIS Login ID (the email where the roster has no login)
    submission  TEXT               -- the student's submission; NULL: none, and a "missing" row stands for them
);
-- The course file's extensions and overrides in force, by student (a roster id; a submission's name without one).
CREATE TABLE IF NOT EXISTS adjustments (
    student     TEXT NOT NULL,
    assignment  TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('extension', 'override')),
    value       TEXT NOT NULL,     -- the extended due date (ISO 8601), the score, or "excused"
    reason      TEXT NOT NULL,
    PRIMARY KEY (student, assignment, kind)
);
-- Every change of an extension or override: what changed, when, why and by which command. Only ever added to.
CREATE TABLE IF NOT EXISTS audit (
    at          TEXT NOT NULL,     -- ISO 8601, UTC
    command     TEXT NOT NULL,
    student     TEXT NOT NULL,
    assignment  TEXT NOT NULL,
    change      TEXT NOT NULL,     -- "extension", "override", each maybe followed by " removed"
    before      TEXT NOT NULL,
    after       TEXT NOT NULL,
    reason      TEXT NOT NULL
);
"""
MISSING = "missing"
SCORED = ("graded", MISSING)  # the rows with a score: a student with no submission scores 0
EXCUSED = "excused"  # an override's value: the assignment does not count


class Final(NamedTuple):
    """One assignment of one row, as every export shows it."""

    raw: float  # the score as graded
    penalised: float  # after the late policy (the raw score where none applies)
    final: float | None  # after the course file's override (its score); None where the assignment is excused
    graded: float  # the maximum graded here
    total: float  # the maximum in all
    adjusted: str  # "", "override" or "excused"


def store_roster(book: Gradebook, students: list, submissions: dict[str, str]) -> None:
    """Replace the roster (autograder.cohort.course.Student objects, in order) and its "missing" rows: each
    student's submission is `submissions`' (student id -> a submission's name); for each student without
    one, a row of status "missing" named by the id, scoring 0 of each assignment's maximum among the graded
    submissions. One transaction."""
    maxima = _maxima(book)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    roster = [(i, s.id, s.name, s.email, s.section, s.login or s.email, submissions.get(s.id))
              for i, s in enumerate(students)]
    missing = [(s.id, "", MISSING, 0.0, rounded(sum(maxima.values())), json.dumps({a: [0.0, m] for a, m in maxima.items()}),
                clean(f"no submission from {s.name} ({s.id}), who is on the roster"), now, None)
               for s in students if s.id not in submissions]
    with book._transaction() as db:
        db.execute("DELETE FROM roster")
        db.executemany("INSERT INTO roster VALUES (?, ?, ?, ?, ?, ?, ?)", roster)
        db.execute("DELETE FROM submissions WHERE status = ?", (MISSING,))
        db.executemany("INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", missing)


def _maxima(book: Gradebook) -> dict[str, float]:
    """{assignment: its maximum in all}, the highest among the graded submissions."""
    found: dict[str, float] = {}
    for row in book.rows():
        for name, parts in row["parts"].items() if row["status"] == "graded" else ():
            found[name] = max(found.get(name, 0.0), rounded(parts.total))
    return dict(sorted(found.items()))


def roster(book: Gradebook) -> list[dict]:
    """The roster's rows in its order ([] without a roster), each with its submission's name or None."""
    return _dicts(book._db.execute("SELECT * FROM roster ORDER BY position"))


def stored_adjustments(book: Gradebook) -> dict[tuple[str, str, str], tuple[str, str]]:
    """{(student, assignment, kind): (value, reason)} of the extensions and overrides in force."""
    cursor = book._db.execute("SELECT student, assignment, kind, value, reason FROM adjustments")
    return {(student, assignment, kind): (value, reason) for student, assignment, kind, value, reason in cursor}


def store_adjustments(book: Gradebook, entries: dict[tuple[str, str, str], tuple[str, str]], changes: list[dict],
                      command: str) -> None:
    """Replace the extensions and overrides in force with `entries` (as stored_adjustments() gives them) and
    add `changes` (dicts of student, assignment, change, before, after, reason) to the audit, made by
    `command`, in one transaction."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with book._transaction() as db:
        db.execute("DELETE FROM adjustments")
        db.executemany("INSERT INTO adjustments VALUES (?, ?, ?, ?, ?)", [(*k, *v) for k, v in entries.items()])
        db.executemany("INSERT INTO audit VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       [(now, command, c["student"], c["assignment"], c["change"], c["before"], c["after"], c["reason"])
                        for c in changes])


def audit(book: Gradebook) -> list[dict]:
    """The audit's rows, oldest first."""
    return _dicts(book._db.execute("SELECT * FROM audit ORDER BY rowid"))


def adjustments(book: Gradebook) -> dict[str, dict[str, dict[str, dict]]]:
    """{row name: {assignment: {kind: {"value": ..., "reason": ...}}}}: each student's extensions and overrides
    under the name of the row that stands for the student (the submission, or the "missing" row)."""
    rows = {row["id"]: row["submission"] or row["id"] for row in roster(book)}
    found: dict[str, dict[str, dict[str, dict]]] = {}
    for (student, assignment, kind), (value, reason) in stored_adjustments(book).items():
        found.setdefault(rows.get(student, student), {}).setdefault(assignment, {})[kind] = {"value": value,
                                                                                            "reason": reason}
    return found


def finals(book: Gradebook) -> dict[str, dict[str, Final]]:
    """{row name: {assignment: Final}} of every row with a score (graded, or missing): the raw score, then
    the late policy's penalty, then the course file's override or excuse."""
    late, adjusted, found = book.late(), adjustments(book), {}
    for row in book.rows():
        if row["status"] not in SCORED:
            continue
        mine = found[row["name"]] = {}
        for name, parts in row["parts"].items():
            penalised = late.get(row["name"], {}).get(name, {}).get("penalised", rounded(parts.score))
            value = adjusted.get(row["name"], {}).get(name, {}).get("override", {}).get("value")
            final = penalised if value is None else None if value == EXCUSED else rounded(float(value))
            mine[name] = Final(rounded(parts.score), penalised, final, rounded(parts.graded), rounded(parts.total),
                               "" if value is None else EXCUSED if value == EXCUSED else "override")
    return found


def _final_cells(mine: dict[str, Final] | None, assignments: list[str]) -> list:
    """grades.csv's final score per assignment ("excused" where excused) and their total."""
    if mine is None:
        return [""] * (len(assignments) + 1)
    cells = [EXCUSED if a in mine and mine[a].final is None else mine[a].final if a in mine else "" for a in assignments]
    return [*cells, rounded(sum(c for c in cells if isinstance(c, float)))]


def roster_view(path: Path) -> dict[str, list]:
    """For the cohort report, from a gradebook opened read-only: "missing" the roster's students with no
    submission, "unknown" the submissions of no one on the roster, "adjustments" the extensions and
    overrides in force, "audit" every change of them, newest first (empty where there is none)."""
    db = open_read_only(path)
    try:
        if not _columns(db, "audit"):  # a gradebook made before the roster existed
            return {"missing": [], "unknown": [], "adjustments": [], "audit": []}
        students = _dicts(db.execute("SELECT * FROM roster ORDER BY position"))
        on_roster = {row["submission"] for row in students}
        names = [name for (name,) in db.execute("SELECT name FROM submissions WHERE status != ? ORDER BY name",
                                                (MISSING,))]
        return {"missing": [row for row in students if row["submission"] is None],
                "unknown": [name for name in names if name not in on_roster] if students else [],
                "adjustments": _dicts(db.execute("SELECT * FROM adjustments ORDER BY student, assignment, kind")),
                "audit": _dicts(db.execute("SELECT * FROM audit ORDER BY rowid DESC"))}
    finally:
        db.close()


# Read-only queries, for views of a whole cohort (the HTML report): they never create, change or lock a
# gradebook, and return plain rows, so a view shows whatever statuses and columns the grader stored.

def open_read_only(path: Path) -> sqlite3.Connection:
    """A connection to an existing gradebook that refuses every write."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no gradebook at {path}: grade the cohort first with "
                                f"`python -m autograder batch SUBMISSIONS --out {path.parent}`")
    db = sqlite3.connect(path)
    db.execute("PRAGMA query_only = ON")
    return db


def _dicts(cursor: sqlite3.Cursor) -> list[dict]:
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def submission_rows(db: sqlite3.Connection) -> list[dict]:
    """Every submission's row, its stored report (JSON text, or None) included, by name."""
    return _dicts(db.execute("SELECT * FROM submissions ORDER BY name"))


def result_rows(db: sqlite3.Connection) -> list[dict]:
    """Every test row of every submission, by submission and position."""
    return _dicts(db.execute("SELECT * FROM tests ORDER BY submission, position"))


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    """The columns of `table` (none when the gradebook has no such table: one made before it existed)."""
    return {row[1] for row in db.execute("SELECT * FROM pragma_table_info(?)", (table,))}


def late_rows(db: sqlite3.Connection) -> list[dict]:
    """The late policy's rows as stored (the penalty as assessed; the scores as of then: Gradebook.late()
    says why a view computes the penalised score from the current raw one)."""
    return _dicts(db.execute("SELECT * FROM late ORDER BY submission, assignment")) if _columns(db, "late") else []


def roster_sections(db: sqlite3.Connection) -> dict[str, str]:
    """{row name: section} from the roster: a student's submission, or the id naming their "missing" row."""
    if not {"id", "submission", "section"} <= _columns(db, "roster"):
        return {}
    rows = db.execute("SELECT coalesce(submission, id), section FROM roster WHERE section IS NOT NULL")
    return {str(name): str(section) for name, section in rows if str(section).strip()}
