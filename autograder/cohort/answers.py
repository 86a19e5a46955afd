"""The answers released at the course file's date: which assignments' answer keys students may see now,
and `make answers`' bundle.

    released = released_keys(Path("grading.toml"), now=None)   # {assignment: AnswerKey}, those past their date
    python -m autograder.cohort.answers build/answers           # `make answers`: build/answers/<assignment>.md

The course file sets the date (`[answers] release`, or `answers_release` in an [assignments.<name>]
section: autograder/cohort/course.py); an assignment without one is never released. Every view that
shows a key (feedback.md, results.json, nbgrader's feedback, the student release, this bundle) gets the
released keys from `released_keys`, whose `now` tests set; before the date they get none.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from autograder.cohort.course import COURSE_FILE, CourseError, load_answers_release, parse_time
from autograder.report.answers import AnswerKey, key_markdown
from autograder.written.answer_key import SOLUTIONS, SUITES, answer_key, course_assignments


def default_course() -> Path | None:
    """The course file of the working folder, where there is one (as the command line reads it)."""
    return Path(COURSE_FILE) if Path(COURSE_FILE).is_file() else None


def released_keys(course: Path | None, now: datetime | None = None, assignments: Iterable[str] | None = None,
                  solutions: Path = SOLUTIONS, suites: Path = SUITES) -> dict[str, AnswerKey]:
    """{assignment: its AnswerKey} for the assignments whose release date is at or before `now` (default: the
    clock); {} without a course file. `assignments` defaults to those of `solutions`. A wrong release date is
    a CourseError that names it."""
    if course is None:
        return {}
    now = now or datetime.now(timezone.utc)
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"now must carry its UTC offset, got {now.isoformat()}")
    names = list(assignments) if assignments is not None else course_assignments(solutions)
    return {name: answer_key(name, release, solutions, suites)
            for name, release in load_answers_release(course, names).items() if release <= now}


def write_bundle(dest: Path, keys: dict[str, AnswerKey]) -> list[Path]:
    """dest/<assignment>.md for each key, dest emptied first (no key of an earlier build stays); return them."""
    dest = Path(dest)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    written = []
    for name, key in sorted(keys.items()):
        (dest / f"{name}.md").write_text(key_markdown(key), encoding="utf-8")
        written.append(dest / f"{name}.md")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="where to write <assignment>.md for each released assignment")
    parser.add_argument("--course", type=Path, metavar="FILE",
                        help=f"the course file with the release dates (default: {COURSE_FILE} in the working folder)")
    parser.add_argument("--now", metavar="TIME", help="build as at this ISO 8601 date-time with its UTC offset "
                        "(default: now), e.g. to preview a bundle before its release")
    args = parser.parse_args(argv)
    course = args.course or default_course()
    if course is None:
        parser.error(f"no course file ({COURSE_FILE} in the working folder, or --course): the release dates are "
                     "set there, e.g. [answers] release = 2027-01-27T17:00:00-08:00")
    try:
        now = parse_time(args.now, "--now") if args.now else None
        keys = released_keys(course, now)
        dates = load_answers_release(course, course_assignments())
    except CourseError as exc:
        parser.error(str(exc))
    for name in course_assignments():
        if name not in dates:
            print(f"{name}: no release date in {course} ([answers] release or answers_release): not written")
        elif name not in keys:
            print(f"{name}: its answers are released at {dates[name].isoformat()}, not yet: not written")
    for path in write_bundle(args.dest, keys):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
