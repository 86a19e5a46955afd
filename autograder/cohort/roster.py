"""The roster, and the course file's extensions and overrides, brought into the gradebook.

    settle(book, Path("grading.toml"), "python -m autograder batch subs --out out")   # by batch and export
    for_gradescope(report, out, Path("grading.toml"), Path("submission_metadata.json"))  # by grade, on Gradescope

A submission is a student's when its name is the student's id, the roster's `submission` for them, their
email, login or name, compared without case and with spaces, `_`, `-` and `.` alike (`ada_lovelace` is
"Ada Lovelace"). A submission that matches two students, or a student that two submissions match, is an
error that names them: the roster's submission column settles it. Each student with no submission gets a
gradebook row of status "missing" that scores 0; a submission of no one on the roster is graded as usual,
and the batch, the cohort report and the export name it (the LMS file leaves it out: no LMS could place it).

Extensions and overrides are kept in the gradebook by student (autograder.report.gradebook), and each one
added, changed or removed goes into the gradebook's history with the command that made the change. An
extension moves the student's due date for the late policy, which every command assesses again from the course
file with the submission times it last used (so a changed extension, due date or last accepted date is seen by
`report`, `manual import` and `export` alike); an override sets an assignment's score after the late policy,
or excuses it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from autograder.cohort.course import Adjustments, CourseError, Student, load_adjustments, load_late, load_roster
from autograder.cohort.late import apply, apply_to_submission
from autograder.report import history
from autograder.report.gradebook import (EXCUSED, MISSING, finals, roster, store_adjustments, store_roster,
                                         stored_adjustments)
from autograder.report.text import name_key as key, points

EXTENSION, OVERRIDE = "extension", "override"  # the kinds of the gradebook's adjustments


class RosterError(CourseError):
    """The submissions cannot be matched to the roster: the message names them and what to do."""




def _index(students) -> dict[str, set[str]]:
    """{key: the ids of the students it names} over each student's id, submission, email, login and name."""
    index: dict[str, set[str]] = {}
    for student in students:
        for value in (student.id, student.submission, student.email, student.login, student.name):
            if value.strip():
                index.setdefault(key(value), set()).add(student.id)
    return index


@dataclass(frozen=True)
class Match:
    submissions: dict[str, str]  # student id -> the name of the student's submission
    unknown: list[str]  # the submissions of no one on the roster


def match(students: tuple[Student, ...], names: list[str]) -> Match:
    """Which of the submissions `names` is whose; a RosterError where one matches two students or two match one."""
    index, found, unknown = _index(students), {}, []
    for name in sorted(names):
        ids = index.get(key(name), set())
        if len(ids) > 1:
            raise RosterError(f"submission {name!r} matches the students {', '.join(sorted(ids))} of the roster: "
                              "give the right one the submission's name in the roster's submission column")
        if not ids:
            unknown.append(name)
            continue
        (student,) = ids
        if student in found:
            raise RosterError(f"the submissions {found[student]!r} and {name!r} both match student {student} of "
                              "the roster: remove or rename the one that is not theirs")
        found[student] = name
    return Match(found, unknown)


@dataclass(frozen=True)
class Settled:
    messages: list[str]  # what to tell the instructor
    changed: bool  # whether the gradebook changed: its roster, its missing rows, its adjustments or its late policy


def settle(book, course: Path | None, command: str, known: list[str] | None = None,
           late: tuple | None = None) -> Settled:
    """Bring the course file's roster, extensions and overrides into the gradebook `book`, then the late
    policy: `late` = (policy, submission times) as `batch --times` gives them; without it, the policy is
    assessed again with the stored times where an extension changed. `command` is what the history names
    where no command line set who is acting (autograder.report.history)."""
    with history.unless_acting(command):
        return _settle(book, course, known, late)


def _settle(book, course: Path | None, known: list[str] | None, late: tuple | None) -> Settled:
    students = (load_roster(course) if course else None) or ()
    wanted = load_adjustments(course, known) if course else Adjustments()
    policy = late[0] if late else load_late(course, known) if course else None
    found = match(students, [row["name"] for row in book.rows() if row["status"] != MISSING])
    stored_roster, late_before = roster(book), book.late()
    store_roster(book, students, found.submissions)
    rows = {s.id: found.submissions.get(s.id, s.id) for s in students}  # student -> the name of their row
    entries, before = _as_stored(wanted), stored_adjustments(book)
    # With the times it last used, the late policy is assessed again by every command: a changed due date,
    # extension, last accepted date or answers' release is seen by each one alike.
    messages, reassessed = [], policy is not None and late is None and bool(late_before)
    if policy is not None and (late is not None or reassessed):
        extended = {(rows.get(e.student, e.student), e.assignment): e.due for e in wanted.extensions}
        messages += [f"late policy: {w}" for w in apply(book, policy, late[1] if late else _times(late_before),
                                                        extended)[1]]
    changes = _changes(book, before, entries, rows, policy, late_before)
    store_adjustments(book, entries, changes)
    messages += _roster_notes(students, found) + [
        f"{c['change']}: {c['student']}, {c['assignment']}: {c['before']} -> {c['after']} ({c['reason']})"
        for c in changes] + _unapplied(book, wanted, rows)
    moved = _penalties(late_before) != _penalties(book.late())
    return Settled(messages, bool(changes) or moved or roster(book) != stored_roster)


def _penalties(late: dict[str, dict[str, dict]]) -> dict:
    return {(name, a): (row["penalty"], row["due"], row["note"]) for name, rows in late.items() for a, row in rows.items()}


def _as_stored(wanted: Adjustments) -> dict[tuple[str, str, str], tuple[str, str]]:
    """The course file's extensions and overrides as the gradebook keeps them."""
    entries = {(e.student, e.assignment, EXTENSION): (e.due.isoformat(), e.reason) for e in wanted.extensions}
    entries.update({(o.student, o.assignment, OVERRIDE): (EXCUSED if o.excused else points(o.score), o.reason)
                    for o in wanted.overrides})
    return entries


def _times(late: dict[str, dict[str, dict]]) -> dict:
    """The submission times the late policy last used (Gradebook.late()), by submission and assignment."""
    return {(name, assignment): datetime.fromisoformat(row["submitted_at"])
            for name, assignments in late.items() for assignment, row in assignments.items() if row["submitted_at"]}


def _changes(book, before: dict, entries: dict, rows: dict[str, str], policy, late_before: dict) -> list[dict]:
    """The audit's rows for what changed between the adjustments stored and the course file's: each with what
    it was and what it is (an extension: the due date and what the late policy made of it; an override: the
    score after the late policy, or the score set, or "excused")."""
    final, late_after, changes = finals(book), book.late(), []
    for student, assignment, kind in sorted({*before, *entries}):
        old, new = before.get((student, assignment, kind)), entries.get((student, assignment, kind))
        if old == new:
            continue
        row = rows.get(student, student)
        if kind == EXTENSION:
            due = policy.assignments[assignment].due.isoformat() if policy and assignment in policy.assignments else "-"
            was = _due(old[0] if old else due, late_before.get(row, {}).get(assignment))
            now = _due(new[0] if new else due, late_after.get(row, {}).get(assignment))
        else:
            graded = final.get(row, {}).get(assignment)
            score = points(graded.penalised) if graded else "-"  # what the late policy left, before any override
            was, now = old[0] if old else score, new[0] if new else score
        if kind == OVERRIDE and EXCUSED in ((old or ("",))[0], (new or ("",))[0]):
            kind = EXCUSED  # an excusal given or taken back
        changes.append({"student": student, "submission": row if row != student else "", "assignment": assignment,
                        "change": kind + ("" if new else " removed"), "before": was, "after": now,
                        "reason": new[1] if new else f"removed from the course file (its reason was: {old[1]})"})
    return changes


def _due(due: str, late: dict | None) -> str:
    return f"due {due}" + (f": {late['note']}" if late else "")


def _roster_notes(students: tuple[Student, ...], found: Match) -> list[str]:
    if not students:
        return []
    missing = [f"{s.id} ({s.name})" for s in students if s.id not in found.submissions]
    return ([f"not on the roster, graded but left out of the LMS export: {', '.join(found.unknown)} (add them to "
             "the roster, or name a submission in a student's submission column)"] if found.unknown else []) + (
        [f"{len(missing)} student(s) of the roster without a submission, recorded as missing (score 0): "
         f"{', '.join(missing)}"] if missing else [])


def _unapplied(book, wanted: Adjustments, rows: dict[str, str]) -> list[str]:
    """The extensions and overrides that change no score (no such submission, or none graded), and the
    scores set above the assignment's maximum."""
    final, notes = finals(book), []
    for entry in (*wanted.extensions, *wanted.overrides):
        graded = final.get(rows.get(entry.student, entry.student), {}).get(entry.assignment)
        if graded is None:
            notes.append(f"{entry.student}, {entry.assignment}: no graded submission of theirs, so nothing to apply "
                         "the course file's entry to")
    for entry in wanted.overrides:
        graded = final.get(rows.get(entry.student, entry.student), {}).get(entry.assignment)
        if graded is not None and entry.score is not None and entry.score > graded.maximum:
            notes.append(f"{entry.student}, {entry.assignment}: the score set, {points(entry.score)}, is more than "
                         f"the assignment's {points(graded.maximum)} points")
    return notes


def for_gradescope(report, out: Path, course: Path, metadata: Path) -> list[str]:
    """Gradescope's channel, one graded submission at a time: the course file's late policy, and the
    extensions and overrides of the student that Gradescope's submission_metadata.json names, applied to its
    results.json and feedback.md (autograder.cohort.late.apply_to_submission). The student is found on the
    roster by the metadata's sid (the roster's id) or email; without a roster, an entry's student is compared with
    those. Never by the name: a student may change it in Gradescope, and so take another's extension or override.
    Returns what to tell the grader's log."""
    policy, students, wanted = load_late(course), load_roster(course), load_adjustments(course)
    seen = [key(value) for value in _gradescope_users(metadata) if value.strip()]
    if students:
        index = _index(students)
        ids = {student for value in seen for student in index.get(value, ())}
        student = next(iter(ids)) if len(ids) == 1 else None
        lines = [] if student else ["the student of submission_metadata.json is not on the roster (or matches more "
                                    "than one student): no extension or override applies"]
    else:
        named = {e.student for e in (*wanted.extensions, *wanted.overrides) if key(e.student) in seen}
        student, lines = (next(iter(named)) if len(named) == 1 else None), []
    extended = {e.assignment: e.due for e in wanted.extensions if e.student == student}
    overrides = {o.assignment: o.score for o in wanted.overrides if o.student == student}
    if policy is None and not overrides:
        return lines
    return lines + apply_to_submission(report, out, policy, metadata, extended, overrides)


def _gradescope_users(metadata: Path) -> list[str]:
    """The sid and email of each student of a Gradescope submission (its metadata's users): what the course
    staff set (the sid) or the student verified (the email), not the name the student may change."""
    try:
        users = json.loads(Path(metadata).read_text(encoding="utf-8")).get("users") or []
    except (OSError, UnicodeError, ValueError, AttributeError):
        return []
    return [str(user.get(field) or "") for user in users if isinstance(user, dict) for field in ("sid", "email")]
