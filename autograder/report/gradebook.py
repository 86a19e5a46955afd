"""The cohort's gradebook: one SQLite file, one row per submission, one row per test.

Crash safety: the database is in WAL mode and each submission is recorded in one transaction
(its old rows deleted, its new rows inserted, committed), so killing the process at any moment
loses at most the submission being recorded, and nothing is ever counted twice. A submission
recorded with status "error" (the grader failed on its first grading) is not current, so the next batch grades it
again. The grader never loses a result: a grader error on a regrade of a submission that has a grade leaves that
grade in place and is kept beside it (table failed_regrades, `failed_regrades()`), saying so in every view, until a
grading completes; such a submission is not current either. One recorded "not_gradable" (nothing of it could be graded: a corrupt zip, an empty folder) is current
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

from autograder.report import history
from autograder.report.parts import COLUMNS as PART_COLUMNS, Parts, after_penalty, by_assignment
from autograder.report.text import clean, name_key, points, rounded, safe_cell
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
-- A regrade that hit a grader error while the submission had a grade, which stands meanwhile (record_error); the
-- next batch grades the submission again, and a grading that completes removes the row.
CREATE TABLE IF NOT EXISTS failed_regrades (
    submission  TEXT PRIMARY KEY,
    digest      TEXT NOT NULL,  -- the contents the regrade was of
    at          TEXT NOT NULL,  -- ISO 8601, UTC
    message     TEXT NOT NULL   -- the grader's error, a traceback maybe
);
-- The late days each student may spend, as the late policy last assessed was set ([late_days] budget): one row,
-- none where no assignment's rule is "late_days".
CREATE TABLE IF NOT EXISTS late_budget (
    one     INTEGER PRIMARY KEY CHECK (one = 1),
    budget  INTEGER NOT NULL
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
        self._db.executescript(SCHEMA + ROSTER_SCHEMA + EXPORTS_SCHEMA + MANUAL_SCHEMA)
        history.ensure(self._db)
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
        """True when `name` was graded, or found not gradable, from exactly these contents (not an error), and no
        regrade of it failed since."""
        row = self._db.execute("SELECT digest, status FROM submissions WHERE name = ?", (name,)).fetchone()
        failed = self._db.execute("SELECT 1 FROM failed_regrades WHERE submission = ?", (name,)).fetchone()
        return row is not None and row[0] == digest and row[1] in CURRENT and failed is None

    def record(self, name: str, digest: str, report: GradeReport) -> None:
        """Store a graded submission, replacing whatever was stored under `name`. Its message says how
        many of the maximum points were not graded on this machine (GPU-only tests). A report that says
        the submission is not gradable is stored as such, with its reason and no score."""
        if report.not_gradable:
            with self._transaction() as db:
                before = _grades(db, name)
                self._replace(db, name, digest, "not_gradable", None, None, {}, clean(report.not_gradable),
                              report.to_json())
                _record_grades(db, name, before, "not gradable: " + clean(report.not_gradable))
            return
        groups = {a: [sum(t.points for t in ts), sum(t.max_points for t in ts)]
                  for a, ts in report.by_assignment().items()}
        tests = [(name, i, clean(t.name), t.assignment, t.status, t.points, t.max_points, t.visibility,
                  clean(t.message)) for i, t in enumerate(report.tests)]
        waiting = sum(t.max_points for t in report.tests if t.status == "not_graded")
        note = f"{waiting:g} GPU points not graded" if waiting else ""
        with self._transaction() as db:
            before, how = _grades(db, name), _how(db, name, digest)
            self._replace(db, name, digest, "graded", report.score, report.max_score, groups, note,
                          report.to_json())
            db.executemany("INSERT INTO tests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", tests)
            _apply_manual(db, name)  # scores given by hand to these very answers earlier
            _record_grades(db, name, before, how)

    def record_error(self, name: str, digest: str, message: str) -> bool:
        """Store a grader error on `name` (`digest`: the contents it was grading); the next batch grades it again.
        A submission with a grade keeps it, the grade and everything derived from it: the error is kept beside it
        (failed_regrades) and the history says that the regrade failed and the grade stands. A first grading that
        fails (or one of a submission without a score) is a row of status "error". Returns whether a grade
        stands."""
        message = clean(message)
        with self._transaction() as db:
            before = _grades(db, name)
            if before[0] == "graded":
                at = datetime.now(timezone.utc).isoformat(timespec="seconds")
                db.execute("INSERT OR REPLACE INTO failed_regrades VALUES (?, ?, ?, ?)", (name, digest, at, message))
                reason = f"grader error on a regrade, so this grade stands: {_last_line(message)}"
                history.add(db, [{"student": _student_of(db, name), "submission": name, "assignment": a,
                                  "change": "graded", "before": grade, "after": grade, "reason": reason}
                                 for a, grade in sorted(before[1].items())])
                return True
            self._replace(db, name, digest, "error", None, None, {}, message, None)
            _record_grades(db, name, before, "grader error: " + _last_line(message))
        return False

    def failed_regrades(self) -> dict[str, dict]:
        """{submission: {digest, at, message}} of the regrades that failed while the submission's grade stands
        (failed_regrades_of)."""
        return failed_regrades_of(self._db)

    def _replace(self, db: sqlite3.Connection, name: str, digest: str, status: str, score, max_score,
                 groups: dict, message: str, report: str | None) -> None:
        graded_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        db.execute("DELETE FROM failed_regrades WHERE submission = ?", (name,))  # this grading supersedes it
        db.execute("DELETE FROM tests WHERE submission = ?", (name,))
        db.execute("DELETE FROM submissions WHERE name = ?", (name,))
        db.execute("INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (name, digest, status, score, max_score, json.dumps(groups), message, graded_at, report))

    def rows(self) -> list[dict]:
        """One dict per submission, by name; `assignments` maps assignment -> [score, max_score] (as stored),
        `parts` assignment -> the score and the parts of its maximum (autograder.report.parts)."""
        return scored_rows(self._db)

    def tests(self, name: str) -> list[dict]:
        """The per-test rows of one submission, in the report's order."""
        cursor = self._db.execute("SELECT * FROM tests WHERE submission = ? ORDER BY position", (name,))
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]

    def report(self, name: str) -> GradeReport | None:
        """The stored lossless report of a graded submission (None if absent or an error)."""
        row = self._db.execute("SELECT report FROM submissions WHERE name = ?", (name,)).fetchone()
        return GradeReport.from_json(row[0]) if row and row[0] else None

    def record_late(self, entries, budget: int | None = None) -> None:
        """Replace the late policy's rows with `entries` (autograder.cohort.late.Lateness), and the late days'
        `budget` (None: no assignment spends late days), in one transaction; each changed submission time and
        penalty goes into the history."""
        rows = [(e.student, e.assignment, e.submitted.isoformat() if e.submitted else None, e.due.isoformat(),
                 e.days_late, e.late_days_used, e.penalty, e.score, e.max_score, e.penalised, clean(e.note))
                for e in entries]
        with self._transaction() as db:
            before = {(r[0], r[1]): r for r in db.execute("SELECT submission, assignment, submitted_at, penalty, "
                                                          "note FROM late")}
            db.execute("DELETE FROM late")
            db.executemany("INSERT INTO late VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            db.execute("DELETE FROM late_budget")
            if budget is not None:
                db.execute("INSERT INTO late_budget VALUES (1, ?)", (budget,))
            history.add(db, _late_changes(db, before, rows))

    def late(self) -> dict[str, dict[str, dict]]:
        """{submission: {assignment: the late policy's row}} (late_of)."""
        return late_of(self._db, self.rows())

    def parts(self, name: str) -> dict[str, Parts]:
        """{assignment: the parts of its maximum and the score (autograder.report.parts)} of one submission."""
        return by_assignment(self.tests(name))

    def export_csv(self, path: Path) -> None:
        """One row per student of the roster, in its order, then one per submission of no one on it, by name:
        the roster's id, name, section and email (empty without a roster) and the submission's name (empty for
        a student with no submission); its status and, for a submission not graded, why; per assignment the
        score, its maximum (autograder.report.parts: the one rule), the points of the maximum awaiting hand
        grading and those needing a GPU (not counted); the same for the total. Where a late policy was
        applied, then per assignment the penalised score (the raw one where no policy applies) and the days
        late, the penalised total (the sum of the penalised scores shown), the late days spent and, where the
        policy has a budget of late days, those left. Then per
        assignment the final score (after the course file's override; "excused" where excused), the final total
        and its maximum, excused assignments left out of both. A student of the roster with no submission has a
        row of status "missing", scoring 0; a graded row whose regrade failed says so in its reason, its grade
        standing. Every number is rounded as the other files show it."""
        rows = self.rows()
        parts = {row["name"]: row["parts"] for row in rows}
        assignments = sorted({a for row in rows for a in row["assignments"]} | {a for p in parts.values() for a in p})
        late, final, failed = self.late(), finals(self), self.failed_regrades()
        excused = {name: {a for a, kinds in mine.items() if kinds.get("override", {}).get("value") == EXCUSED}
                   for name, mine in adjustments(self).items()}
        students = {row["submission"] or row["id"]: row for row in roster(self)}
        order = [*students, *sorted({row["name"] for row in rows} - set(students))]
        by_name = {row["name"]: row for row in rows}
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            budget = self._db.execute("SELECT budget FROM late_budget").fetchone()
            extra = [*(f"{a} penalised" for a in assignments), "total penalised",
                     *(f"{a} days late" for a in assignments), "late days spent",
                     *(["late days left"] if budget else [])] if late else []
            extra += [*(f"{a} final" for a in assignments), "total final", "total final max"]
            header = ["id", "student", "section", "email", "submission", "status", "reason"]
            header += [c for a in assignments for c in _part_columns(a)] + _part_columns("total")
            writer.writerow([*header, *extra])
            for name in order:
                row, student = by_name.get(name), students.get(name)
                if row is None:
                    continue  # a student of a roster stored without their row (a gradebook changed by hand)
                mine, scored = parts[name], row["status"] in SCORED
                who = [safe_cell(student[k]) for k in ("id", "name", "section", "email")] if student else [""] * 4
                cells = [c for a in assignments for c in _part_cells(mine.get(a) if scored else None)]
                cells += _part_cells(sum(mine.values(), Parts(0.0, 0.0, 0.0, 0.0)) if scored else None)
                writer.writerow([*who, "" if row["status"] == MISSING else safe_cell(name), row["status"],
                                 safe_cell(_reason(row, failed.get(name))), *cells,
                                 *(_penalised(row, mine, assignments, late, budget and budget[0]) if late else []),
                                 *_final_cells(final.get(name), assignments, excused.get(name, set()))])


def scored_rows(db: sqlite3.Connection) -> list[dict]:
    """Gradebook.rows() of a connection (read-only ones too)."""
    found = db.execute(f"SELECT {', '.join(COLUMNS)} FROM submissions ORDER BY name").fetchall()
    rows = [dict(zip(COLUMNS, row)) for row in found]
    tests: dict[str, list[dict]] = {}
    cursor = db.execute("SELECT submission, assignment, status, points, max_points FROM tests "
                        "ORDER BY submission, position")
    for submission, assignment, status, got, most in cursor:
        tests.setdefault(submission, []).append(
            {"assignment": assignment, "status": status, "points": got, "max_points": most})
    for row in rows:
        row["assignments"] = json.loads(row["assignments"])
        # {assignment: Parts}; a row stored without its tests (a student with no submission) counts its maximum
        row["parts"] = by_assignment(tests.get(row["name"], [])) or {
            a: Parts(pair[0], pair[1], 0.0, 0.0) for a, pair in row["assignments"].items()}
    return rows


def late_of(db: sqlite3.Connection, rows: list[dict]) -> dict[str, dict[str, dict]]:
    """{submission: {assignment: the late policy's row}}; empty when no late policy was applied. The
    penalty and the days late are the policy's as assessed; the score is the current raw score (a
    regrade or a hand grade since changes it), `max_score` the current maximum, and `penalised` is computed
    from the score now, rounded as every file shows it. Rows of submissions or assignments no longer graded
    are left out."""
    if not _columns(db, "late"):
        return {}
    cursor = db.execute("SELECT * FROM late ORDER BY submission, assignment")
    names = [column[0] for column in cursor.description]
    current = {row["name"]: row["parts"] for row in rows if row["status"] == "graded"}
    found: dict[str, dict[str, dict]] = {}
    for values in cursor.fetchall():
        row = dict(zip(names, values))
        parts = current.get(row["submission"], {}).get(row["assignment"])
        if parts is None:
            continue
        row.update(score=rounded(parts.score), max_score=rounded(parts.maximum),
                   penalised=after_penalty(parts.score, row["penalty"]))
        found.setdefault(row["submission"], {})[row["assignment"]] = row
    return found


def _grades(db: sqlite3.Connection, name: str) -> tuple[str, dict[str, str]]:
    """(status, {assignment: "score / maximum"}) of the row `name` as stored now ("", {} where there is none)."""
    row = db.execute("SELECT status FROM submissions WHERE name = ?", (name,)).fetchone()
    if row is None or row[0] == MISSING:
        return "", {}
    tests = [{"assignment": a, "status": s, "points": got, "max_points": most} for a, s, got, most in db.execute(
        "SELECT assignment, status, points, max_points FROM tests WHERE submission = ? ORDER BY position", (name,))]
    return row[0], {a: f"{points(p.score)} / {points(p.maximum)}" for a, p in by_assignment(tests).items()}


def _how(db: sqlite3.Connection, name: str, digest: str) -> str:
    """Why a row is about to be graded (before it is replaced): its first grading, a new version of the
    submission (a resubmission), or the same contents again (a regrade, or a retry after a grader error)."""
    old = db.execute("SELECT digest, status FROM submissions WHERE name = ?", (name,)).fetchone()
    if old is None or old[1] == MISSING:
        return "graded"
    return "graded again: a new version of the submission" if old[0] != digest else \
        "graded again: the same submission"


def _student_of(db: sqlite3.Connection, name: str) -> str:
    """The roster's id of the student whose submission is `name` ("" where the roster has none)."""
    found = db.execute("SELECT id FROM roster WHERE submission = ? OR (submission IS NULL AND id = ?)",
                       (name, name)).fetchone()
    return found[0] if found else ""


def _record_grades(db: sqlite3.Connection, name: str, before: tuple[str, dict[str, str]], reason: str) -> None:
    """The history of a row just replaced: each assignment whose score (or the row's status) changed."""
    (was, old), (now, new) = before, _grades(db, name)
    old = old or ({"": was.replace("_", " ")} if was else {})
    new = new or {a: now.replace("_", " ") for a in old} or {"": now.replace("_", " ")}
    student = _student_of(db, name)
    history.add(db, [{"student": student, "submission": name, "assignment": a, "change": "graded",
                      "before": old.get(a, "-"), "after": new.get(a, "-"), "reason": reason}
                     for a in sorted({*old, *new}) if old.get(a) != new.get(a)])


def _late_changes(db: sqlite3.Connection, before: dict, rows: list[tuple]) -> list[dict]:
    """The history's rows for a late policy assessed again: each changed submission time and penalty."""
    changes = []
    for submission, assignment, submitted, _, days, _, penalty, _, _, _, note in rows:
        old = before.get((submission, assignment))
        base = {"student": _student_of(db, submission), "submission": submission, "assignment": assignment}
        if (old[2] if old else None) != submitted and (old is not None or submitted is not None):
            changes.append({**base, "change": "submission time", "before": (old[2] or "none") if old else "-",
                            "after": submitted or "none: treated as on time", "reason": note})
        if (old[3] if old else 0.0) != penalty:
            changes.append({**base, "change": "late penalty", "before": f"{old[3]:.0%} off" if old else "-",
                            "after": f"{penalty:.0%} off", "reason": note})
    return changes


def _part_columns(assignment: str) -> list[str]:
    """`alpha`, `alpha max`, `alpha max awaiting hand grading`, ... (the total: `total`, `max`, ...)."""
    prefix = "" if assignment == "total" else f"{assignment} "
    return [assignment] + [prefix + title for title in PART_COLUMNS.values()]


def _part_cells(parts: Parts | None) -> list:
    if parts is None:
        return [""] * (1 + len(PART_COLUMNS))
    return [rounded(parts.score)] + [rounded(getattr(parts, name)) for name in PART_COLUMNS]


def failed_regrades_of(db: sqlite3.Connection) -> dict[str, dict]:
    """{submission: {digest, at, message}} of the regrades that failed while the submission's grade stands (none
    in a gradebook made before the table existed); read-only connections too."""
    if not _columns(db, "failed_regrades"):
        return {}
    return {row.pop("submission"): row for row in _dicts(db.execute("SELECT * FROM failed_regrades"))}


def regrade_note(failure: dict) -> str:
    """What every view says of a graded row whose regrade failed (failed_regrades_of's value)."""
    return (f"the regrade of {failure['at']} failed ({_last_line(failure['message'])}): the earlier grade stands, "
            "and the next batch grades it again")


def _reason(row: dict, failure: dict | None) -> str:
    """grades.csv's reason: why a row has no score, or that its regrade failed and its grade stands."""
    if row["status"] != "graded":
        return _last_line(row["message"])
    return regrade_note(failure) if failure else ""


def _last_line(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _penalised(row: dict, parts: dict[str, Parts], assignments: list[str], late: dict, budget: int | None) -> list:
    """Each assignment's penalised score (the raw one where no policy applies), their sum, each one's days late,
    the late days spent and, with a `budget`, those left."""
    mine = late.get(row["name"], {})
    if row["status"] not in SCORED:
        return [""] * (2 * len(assignments) + 2 + bool(budget))
    scores = [mine[a]["penalised"] if a in mine else rounded(parts[a].score) if a in parts else "" for a in assignments]
    days = [mine[a]["days_late"] if a in mine else "" for a in assignments]
    spent = sum(r["late_days_used"] for r in mine.values())
    return [*scores, rounded(sum(v for v in scores if v != "")), *days, spent, *([budget - spent] if budget else [])]


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
        history.add(db, _hand_changes(db, scores))
        before = {name: _grades(db, name) for name in names}
        db.executemany("INSERT OR REPLACE INTO manual_scores VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [(s["submission"], s["question"], json.dumps(s["criteria"]), float(sum(s["criteria"])),
                         s["comment"], s["answer_sha"], graded_at) for s in scores])
        for name in names:
            _apply_manual(db, name)
            _record_grades(db, name, before[name], "hand scores imported")
    return names


def _hand_changes(db: sqlite3.Connection, scores: list[dict]) -> list[dict]:
    """The history's rows of hand scores about to be stored: each answer's earlier score (the same answer's, or
    "awaiting hand grading") and its new one, where they differ."""
    changes = []
    for score in scores:
        earlier = db.execute("SELECT points, comment, answer_sha FROM manual_scores WHERE submission = ? AND "
                             "question = ?", (score["submission"], score["question"])).fetchone()
        row = db.execute("SELECT assignment, max_points FROM tests WHERE submission = ? AND name = ?",
                         (score["submission"], score["question"])).fetchone()
        assignment, most = row if row else ("", 0.0)
        was = f"{points(earlier[0])} / {points(most)}" if earlier and earlier[2] == score["answer_sha"] else \
            "awaiting hand grading"
        now = f"{points(sum(score['criteria']))} / {points(most)}"
        if was != now or (earlier and earlier[1] != score["comment"]):
            changes.append({"student": _student_of(db, score["submission"]), "submission": score["submission"],
                            "assignment": assignment, "change": f"hand score {score['question']}",
                            "before": was, "after": now,
                            "reason": f"criteria {', '.join(points(v) for v in score['criteria'])}"
                                      + (f"; comment: {score['comment']}" if score["comment"] else "")})
    return changes


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
"""
# The files written from the gradebook outside OUT/submissions/ on request (the LMS exports), each rewritten by
# every step that changes the gradebook (autograder.cohort.publish), wherever it was written.
EXPORTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS exports (
    path     TEXT PRIMARY KEY,  -- as given, absolute
    format   TEXT NOT NULL,     -- autograder.report.lms.FILES' keys
    options  TEXT NOT NULL      -- JSON: what the file was written with (Canvas's assignment ids)
);
"""
MISSING = "missing"
SCORED = ("graded", MISSING)  # the rows with a score: a student with no submission scores 0
EXCUSED = "excused"  # an override's value: the assignment does not count


class Final(NamedTuple):
    """One assignment of one row, as every view and export shows it."""

    raw: float  # the score as graded
    penalised: float  # after the late policy (the raw score where none applies)
    final: float | None  # after the course file's override (its score); None where the assignment is excused
    maximum: float  # what the score is out of (autograder.report.parts: the one rule)
    by_hand: float  # of the maximum, the points awaiting hand grading
    gpu: float  # the points of the tests needing a GPU, not graded (not counted)
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
            found[name] = max(found.get(name, 0.0), rounded(parts.maximum))
    return dict(sorted(found.items()))


def roster(book: Gradebook) -> list[dict]:
    """The roster's rows in its order ([] without a roster), each with its submission's name or None."""
    return _dicts(book._db.execute("SELECT * FROM roster ORDER BY position"))


def stored_adjustments(book: Gradebook) -> dict[tuple[str, str, str], tuple[str, str]]:
    """{(student, assignment, kind): (value, reason)} of the extensions and overrides in force."""
    cursor = book._db.execute("SELECT student, assignment, kind, value, reason FROM adjustments")
    return {(student, assignment, kind): (value, reason) for student, assignment, kind, value, reason in cursor}


def store_adjustments(book: Gradebook, entries: dict[tuple[str, str, str], tuple[str, str]],
                      changes: list[dict]) -> None:
    """Replace the extensions and overrides in force with `entries` (as stored_adjustments() gives them) and
    add `changes` (dicts of student, submission, assignment, change, before, after, reason) to the history, in
    one transaction."""
    with book._transaction() as db:
        db.execute("DELETE FROM adjustments")
        db.executemany("INSERT INTO adjustments VALUES (?, ?, ?, ?, ?)", [(*k, *v) for k, v in entries.items()])
        history.add(db, changes)


AUDITED = ("extension", "override", "excused")  # the course file's changes, the report's roster section lists them


def audit(book: Gradebook) -> list[dict]:
    """The history's rows of the course file's extensions, overrides and excusals, oldest first."""
    return [row for row in history.rows(book._db) if row["change"].split(" removed")[0] in AUDITED]


def adjustments(book: Gradebook) -> dict[str, dict[str, dict[str, dict]]]:
    """{row name: {assignment: {kind: {"value": ..., "reason": ...}}}} (adjustments_of)."""
    return adjustments_of(book._db)


def adjustments_of(db: sqlite3.Connection) -> dict[str, dict[str, dict[str, dict]]]:
    """{row name: {assignment: {kind: {"value": ..., "reason": ...}}}}: each student's extensions and overrides
    under the name of the row that stands for the student (the submission, or the "missing" row)."""
    if not _columns(db, "adjustments"):
        return {}
    rows = {row["id"]: row["submission"] or row["id"] for row in _dicts(db.execute("SELECT * FROM roster"))}
    found: dict[str, dict[str, dict[str, dict]]] = {}
    for student, assignment, kind, value, reason in db.execute("SELECT * FROM adjustments"):
        found.setdefault(rows.get(student, student), {}).setdefault(assignment, {})[kind] = {"value": value,
                                                                                            "reason": reason}
    return found


def finals(book: Gradebook) -> dict[str, dict[str, Final]]:
    """{row name: {assignment: Final}} (finals_of)."""
    return finals_of(book._db)


def finals_of(db: sqlite3.Connection) -> dict[str, dict[str, Final]]:
    """{row name: {assignment: Final}} of every row with a score (graded, or missing): the raw score, then
    the late policy's penalty, then the course file's override or excuse. Every view and export reads a
    student's score here, read-only connections (the cohort report) included."""
    rows = scored_rows(db)
    late, adjusted, found = late_of(db, rows), adjustments_of(db), {}
    for row in rows:
        if row["status"] not in SCORED:
            continue
        mine = found[row["name"]] = {}
        for name, parts in row["parts"].items():
            penalised = late.get(row["name"], {}).get(name, {}).get("penalised", rounded(parts.score))
            value = adjusted.get(row["name"], {}).get(name, {}).get("override", {}).get("value")
            final = penalised if value is None else None if value == EXCUSED else rounded(float(value))
            mine[name] = Final(rounded(parts.score), penalised, final, rounded(parts.maximum), rounded(parts.by_hand),
                               rounded(parts.gpu), "" if value is None else EXCUSED if value == EXCUSED else "override")
    return found


def final_total(mine: dict[str, Final]) -> tuple[float, float]:
    """(the final score, its maximum) of a row's assignments, the excused ones left out of both."""
    counted = [f for f in mine.values() if f.final is not None]
    return rounded(sum(f.final for f in counted)), rounded(sum(f.maximum for f in counted))


def _final_cells(mine: dict[str, Final] | None, assignments: list[str], excused: set[str]) -> list:
    """grades.csv's final score per assignment ("excused" where excused, also on a row with no score), their
    total and its maximum."""
    if mine is None:
        return [EXCUSED if a in excused else "" for a in assignments] + ["", ""]
    cells = [EXCUSED if a in mine and mine[a].final is None else mine[a].final if a in mine else "" for a in assignments]
    return [*cells, *final_total(mine)]


def roster_view(path: Path) -> dict[str, list]:
    """For the cohort report, from a gradebook opened read-only: "missing" the roster's students with no
    submission, "unknown" the submissions of no one on the roster, "adjustments" the extensions and
    overrides in force, "audit" every change of them, newest first (empty where there is none)."""
    db = open_read_only(path)
    try:
        if not _columns(db, "adjustments"):  # a gradebook made before the roster existed
            return {"missing": [], "unknown": [], "adjustments": [], "audit": []}
        students = _dicts(db.execute("SELECT * FROM roster ORDER BY position"))
        on_roster = {row["submission"] for row in students}
        names = [name for (name,) in db.execute("SELECT name FROM submissions WHERE status != ? ORDER BY name",
                                                (MISSING,))]
        return {"missing": [row for row in students if row["submission"] is None],
                "unknown": [name for name in names if name not in on_roster] if students else [],
                "adjustments": _dicts(db.execute("SELECT * FROM adjustments ORDER BY student, assignment, kind")),
                "audit": [row for row in reversed(history.rows(db)) if row["change"].split(" removed")[0] in AUDITED]
                if _columns(db, "history") else []}
    finally:
        db.close()


def changes_of(db: sqlite3.Connection, student: str) -> tuple[list[str], list[dict]]:
    """(who `student` names: roster ids and submission names, the history's rows about them, oldest first).
    `student` is matched as the roster matches a submission (autograder.report.text.name_key) against each
    student's id, submission, email, login and name, and against the submissions' names."""
    wanted = name_key(student)
    students = _dicts(db.execute("SELECT * FROM roster")) if _columns(db, "roster") else []
    ids = {s["id"] for s in students if wanted in {name_key(s[k] or "") for k in ("id", "submission", "email", "login",
                                                                               "name")}}
    names = {s["submission"] for s in students if s["id"] in ids and s["submission"]}
    names |= {name for (name,) in db.execute("SELECT name FROM submissions WHERE status != ?", (MISSING,))
              if name_key(name) == wanted}
    if not ids and not names:
        return [], []
    found = [row for row in history.rows(db) if (row["student"] and row["student"] in ids) or row["submission"] in names]
    return sorted(ids) + sorted(names - ids), found


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
