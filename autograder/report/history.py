"""The record of every change to a grade: when, who, by which command, what it was and what it is, and why.

    python -m autograder history STUDENT --out OUT     # the changes of one student, oldest first

The gradebook keeps one table, `history`, that is only ever added to, in the same transaction as the change
itself (so a change is never without its record, nor a record without its change). What is recorded:
  graded           a submission's score of an assignment as graded, and each regrade that changed it (a
                   resubmission, `batch --regrade`, or a grader error and its retry); a regrade the grader
                   failed leaves the grade standing, recorded with the same before and after
  hand score       a written answer scored by hand (`manual import`), replacing the earlier score of that answer
  override         a score set by the course file, changed or removed ([[overrides]])
  excused          an assignment excused, or no longer ([[overrides]] excused = true)
  extension        a due date extended, changed or removed ([[extensions]]), with what the late policy made of it
  submission time  the time the late policy uses for a submission (`batch --times`)
  late penalty     the fraction the late policy removes (days late, late days, the last accepted date)
Each row names the student by the roster's id where the gradebook has a roster, and the submission. Who
made it is the operating-system user running the command, or `--by NAME`; the command is the command line.

A gradebook made before this table existed had an `audit` table of the extensions and overrides alone: its
rows are copied into the history the first time the gradebook is opened, and the audit is kept as it was.
"""

from __future__ import annotations

import getpass
import sqlite3
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Iterator, NamedTuple

HISTORY_SCHEMA = """
CREATE TABLE IF NOT EXISTS history (
    at          TEXT NOT NULL,     -- ISO 8601, UTC
    by          TEXT NOT NULL,     -- who: the operating-system user, or --by
    command     TEXT NOT NULL,     -- the command line that made the change
    student     TEXT NOT NULL,     -- the roster's id ("" where the submission matches no one on a roster)
    submission  TEXT NOT NULL,     -- the submission's name ("" for a student without one)
    assignment  TEXT NOT NULL,
    change      TEXT NOT NULL,     -- one of CHANGES, maybe followed by what it is about (a question) or " removed"
    before      TEXT NOT NULL,
    after       TEXT NOT NULL,
    reason      TEXT NOT NULL
);
"""
CHANGES = ("graded", "hand score", "override", "excused", "extension", "submission time", "late penalty")
LIBRARY = "a library call (no command line)"


class Actor(NamedTuple):
    by: str
    command: str


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's user)
        import os

        return f"uid {os.getuid()}"


_ACTOR: ContextVar[Actor | None] = ContextVar("history_actor", default=None)


def actor() -> Actor:
    """Who is changing the gradebook now: what `acting` set, else the operating-system user and no command."""
    return _ACTOR.get() or Actor(_user(), LIBRARY)


@contextmanager
def acting(by: str | None, command: str) -> Iterator[Actor]:
    """Record the changes made inside as made by `by` (default: the operating-system user) running `command`."""
    token = _ACTOR.set(Actor(by.strip() if by and by.strip() else _user(), command))
    try:
        yield _ACTOR.get()
    finally:
        _ACTOR.reset(token)


@contextmanager
def unless_acting(command: str) -> Iterator[Actor]:
    """As `acting(None, command)` where no command line set who is acting (a library call names itself)."""
    if _ACTOR.get() is not None:
        yield _ACTOR.get()
        return
    with acting(None, command) as who:
        yield who


def ensure(db: sqlite3.Connection) -> None:
    """The history table, with the rows of an older gradebook's audit copied in once."""
    exists = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'history'").fetchone()
    db.executescript(HISTORY_SCHEMA)
    if exists:
        return
    audit = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit'").fetchone()
    if audit:
        db.execute("INSERT INTO history SELECT at, '', command, student, '', assignment, change, before, after, "
                   "reason FROM audit ORDER BY rowid")


def add(db: sqlite3.Connection, changes: list[dict]) -> None:
    """Add `changes` (dicts with student, submission, assignment, change, before, after and maybe reason), made
    now by actor(), inside the caller's transaction."""
    if not changes:
        return
    now, who = datetime.now(timezone.utc).isoformat(timespec="seconds"), actor()
    db.executemany("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   [(now, who.by, who.command, c.get("student", ""), c.get("submission", ""), c["assignment"],
                     c["change"], str(c["before"]), str(c["after"]), c.get("reason", "")) for c in changes])


def rows(db: sqlite3.Connection) -> list[dict]:
    """Every row of the history, oldest first."""
    cursor = db.execute("SELECT * FROM history ORDER BY rowid")
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]
