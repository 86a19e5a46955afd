"""The parts of a maximum, and the one rule for the maximum, defined once: every view (feedback.md,
results.json, junit.xml, the terminal, grades.csv, the cohort report, the LMS exports, the nbgrader
gradebook) says a score and its denominator with these names and numbers.

The rule: an assignment is graded out of its **maximum**, the points of all its tests and written answers
less the points of the tests that need a GPU while they are not graded. Written answers awaiting hand
grading are inside the maximum (0 points until a grader scores them), so the maximum does not move when
they are graded, and a blank answer counts the same as an answered one; the points of the tests that need a
GPU join the maximum once those tests are graded (on a GPU node, merged in by a regrade there) and until
then are listed apart, not counted. Every submission of an assignment graded on the same kind of machine
therefore has the same maximum.

    graded    the points of the tests graded here, automatically or already by hand
    by_hand   written answers awaiting hand grading (0 points until graded): inside the maximum
    gpu       tests that need a GPU and were not graded: outside the maximum, neither for nor against
    maximum   graded + by_hand: what every score is out of
    total     the three together: what the work is worth in all, once the GPU tests are graded

A "not gradable" submission (autograder.grading.intake refused it) has no parts: it is never "0 / N".
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple

from autograder.report.text import points, rounded

# The part each status of autograder.model.results.STATUSES belongs to; any other status is graded.
AWAITING_HAND = ("manual",)
NEEDS_GPU = ("not_graded",)
# A written question's prose, graded by hand whatever its status (awaiting, graded, or blank): `written/` and the
# question's id (autograder.written.answers.ID); its numeric parts are `written/<id>.<letter>`, graded here.
WRITTEN_PROSE = re.compile(r"written/[A-Z]+[0-9]+(?:\.[0-9]+)?")
# The parts' names in every view: a column's header in grades.csv and the cohort report, a phrase in prose.
LABELS = {"score": "score", "maximum": "maximum", "by_hand": "awaiting hand grading",
          "gpu": "need a GPU, not graded here (not counted)"}
# The maximum's columns in grades.csv (after each score column), by part.
COLUMNS = {"maximum": "max", "by_hand": "max awaiting hand grading", "gpu": "not counted: needing a GPU"}


class Parts(NamedTuple):
    score: float
    graded: float
    by_hand: float
    gpu: float

    @property
    def maximum(self) -> float:
        """What the score is out of (the module's rule)."""
        return self.graded + self.by_hand

    @property
    def total(self) -> float:
        return self.graded + self.by_hand + self.gpu

    def __add__(self, other: "Parts") -> "Parts":  # type: ignore[override]
        return Parts(*(a + b for a, b in zip(self, other)))


NONE = Parts(0.0, 0.0, 0.0, 0.0)


def _field(test, name: str):
    return test[name] if isinstance(test, dict) else getattr(test, name)


def parts_of(tests: Iterable) -> Parts:
    """The parts of some tests (TestResult objects, or the gradebook's test rows as dicts)."""
    score = graded = by_hand = gpu = 0.0
    for test in tests:
        status, maximum = _field(test, "status"), float(_field(test, "max_points"))
        if status in AWAITING_HAND:
            by_hand += maximum
        elif status in NEEDS_GPU:
            gpu += maximum
        else:
            graded += maximum
            score += float(_field(test, "points"))
    return Parts(round(score, 6), round(graded, 6), round(by_hand, 6), round(gpu, 6))


def by_assignment(tests: Iterable) -> dict[str, Parts]:
    """{assignment: Parts}, in the tests' order."""
    groups: dict[str, list] = {}
    for test in tests:
        groups.setdefault(_field(test, "assignment"), []).append(test)
    return {name: parts_of(group) for name, group in groups.items()}


def fraction(parts: Parts) -> str:
    """`12 / 21`: the score out of the maximum."""
    return f"{points(parts.score)} / {points(parts.maximum)}"


def tail(parts: Parts) -> str:
    """`; 3 of them awaiting hand grading; 5 more need a GPU, not graded here (not counted)`: the parts that are
    not zero, empty where there is none."""
    return (f"; {points(parts.by_hand)} of them {LABELS['by_hand']}" if parts.by_hand else "") + (
        f"; {points(parts.gpu)} more {LABELS['gpu']}" if parts.gpu else "")


def describe(parts: Parts) -> str:
    """`12 / 21 points; 3 of them awaiting hand grading; 5 more need a GPU, not graded here (not counted)`."""
    return f"{fraction(parts)} points{tail(parts)}"


def as_dict(parts: Parts) -> dict[str, float]:
    """{score, maximum, graded, by_hand, gpu}, rounded as every file shows them (results.json's extra_data)."""
    return {"score": rounded(parts.score), "maximum": rounded(parts.maximum), "graded": rounded(parts.graded),
            "by_hand": rounded(parts.by_hand), "gpu": rounded(parts.gpu)}


def after_penalty(score: float, penalty: float) -> float:
    """A score after a late penalty (the fraction removed), rounded as every file shows it: computed from the
    raw score whenever a file is written, never stored."""
    return rounded(score * (1 - penalty))
