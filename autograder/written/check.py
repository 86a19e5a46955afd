"""What the grader will read in your answers.md, before you submit: `make check-answers`.

    python -m autograder.written.check [ASSIGNMENT ...]     # every assignment with written questions by default

For each numeric part of each question, the number the grader reads from its line of
assignments/<assignment>/answers.md (the first number after `<ID>.<letter> =`, as autograder.written.answers
reads it when grading: thousands separators, e-notation, powers of ten and a trailing unit accepted), or why
it reads none: no line for it, the line still empty, two answers, no number. For each question's prose, how
much is written. Nothing here knows the keys (the handout beside your code has none): it says what is read,
never whether it is right. What the grader cannot read as an answer (no answers.md, a missing line or
heading, two answers, no number, a fraction where a whole number is graded exactly), and a line it may read
otherwise than the student meant (an expression, "or", several numbers, a percent sign where the part asks
for a fraction: autograder.written.answers.doubts, with the number the grader will read), is marked `!` and
makes the command exit 1; parts not answered yet do not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

from autograder.written.answers import (ANSWERS, Answers, Question, WrittenError, handout_questions, number_text,
                                        prose_of, read_answers, read_part)

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = ROOT / "assignments"


class Row(NamedTuple):
    """One line of the check: a numeric part's or a question's prose."""

    id: str  # "T1.a" for a part, "T1" for a question's prose
    text: str  # what the grader reads there
    bad: bool  # something the grader cannot read as an answer, to fix before submitting
    prose: bool = False
    answered: bool = False


def readings(questions: list[Question], answers: Answers) -> list[Row]:
    """What the grader reads of every numeric part and every question with prose to grade, in the handout's
    order."""
    rows = []
    for question in questions:
        section = answers.sections.get(question.id)
        repeated = question.id in answers.repeated
        for part in question.parts:
            reading = read_part(part, section, repeated, "")
            if reading.value is not None:
                exact = part.tolerance.kind == "exact" and not reading.value.is_integer()
                notes = ["graded exactly, so it must be a whole number"] * exact + [reading.doubt] * bool(reading.doubt)
                rows.append(Row(part.id, f"reads {number_text(reading.value)} (from {reading.shown!r})"
                                + "".join(f"; {note}" for note in notes), bool(notes), answered=True))
            else:
                text = reading.message.removeprefix(f"{part.id}: ")
                rows.append(Row(part.id, "not answered yet" if text.endswith("found 'nothing'") else text,
                                reading.status != "not_implemented"))
        if question.rubric_points:
            prose = prose_of(question, answers)
            rows.append(Row(question.id, f"prose: {len(prose)} characters, graded by hand" if prose else
                            f"prose: not answered yet (write it under `## {question.id}`)", False, True, bool(prose)))
    return rows


def check(assignment: str, root: Path = ASSIGNMENTS) -> tuple[list[Row], str]:
    """The readings of assignment's answers.md in `root` (the release's assignments/); or none and why the
    handout or the whole file cannot be read ("" when they can)."""
    try:
        questions = handout_questions(assignment, root, released=True)
    except WrittenError as exc:
        return [], f"the handout's questions cannot be read: {exc}"
    answers = read_answers(root / assignment / ANSWERS)
    if questions and answers.problem:
        return [], f"nothing is graded: {answers.problem}"
    return readings(questions, answers), ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.written.check", description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", metavar="ASSIGNMENT",
                        help="assignments to check (default: every one with written questions)")
    parser.add_argument("--root", type=Path, default=ASSIGNMENTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    known = sorted(p.parent.name for p in args.root.glob("*/README.md"))
    unknown = [name for name in args.assignments if name not in known]
    if unknown:
        parser.error(f"no assignment {', '.join(unknown)}; one of {', '.join(known)}")
    failed = False
    for assignment in args.assignments or known:
        rows, problem = check(assignment, args.root)
        if problem:
            print(f"! {assignment}: {problem}")
            failed = True
            continue
        if not rows:
            if args.assignments:
                print(f"{assignment}: no written questions")
            continue
        print(f"{assignment}/{ANSWERS}: what the grader reads (not whether it is right)")
        width = max(len(row.id) for row in rows)
        for row in rows:
            print(f"  {'!' if row.bad else ' '} {row.id.ljust(width)}  {row.text}")
        numbers, prose = [r for r in rows if not r.prose], [r for r in rows if r.prose]
        print(f"  {sum(r.answered for r in numbers)} of {len(numbers)} numbers read, "
              f"{sum(r.answered for r in prose)} of {len(prose)} prose answers written")
        failed |= any(row.bad for row in rows)
    if failed:
        print("! marks what the grader cannot read as an answer, or may read otherwise than you meant (it reads the "
              "first number of a line and computes nothing): fix it before you submit")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
