"""The parts of a maximum, defined once: every view (feedback.md, results.json, the terminal, grades.csv,
the cohort report, the nbgrader export) says a score and its denominators with these names and numbers.

    graded    the points of the tests graded here, automatically or already by hand: the score is out of these
    by_hand   written answers awaiting hand grading (0 points until graded)
    gpu       tests that need a GPU: not graded here, so neither for nor against the score
    total     the three together: what the work is worth in all

A "not gradable" submission (autograder.grading.intake refused it) has no parts: it is never "0 / N".
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from autograder.report.text import points, rounded

# The part each status of autograder.model.results.STATUSES belongs to; any other status is graded.
AWAITING_HAND = ("manual",)
NEEDS_GPU = ("not_graded",)
# The parts' names in every view: a column's header in grades.csv and the cohort report, a phrase in prose.
LABELS = {"score": "score", "graded": "graded here", "by_hand": "awaiting hand grading",
          "gpu": "need a GPU, not graded here", "total": "in all"}
# The maxima's columns in grades.csv (after each score column), by part.
COLUMNS = {"graded": "max graded here", "by_hand": "max awaiting hand grading", "gpu": "max needing a GPU",
           "total": "max"}


class Parts(NamedTuple):
    score: float
    graded: float
    by_hand: float
    gpu: float

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
    """`12 / 18`: the score out of the points graded here."""
    return f"{points(parts.score)} / {points(parts.graded)}"


def tail(parts: Parts) -> str:
    """`; 3 awaiting hand grading; 5 need a GPU, not graded here; 26 in all`: the parts other than the graded
    one, those that are not zero, then the total; empty when the points graded here are the total."""
    others = [f"{points(value)} {LABELS[name]}" for name, value in (("by_hand", parts.by_hand), ("gpu", parts.gpu))
              if value]
    return "".join(f"; {part}" for part in others) + (f"; {points(parts.total)} {LABELS['total']}" if others else "")


def describe(parts: Parts) -> str:
    """`12 / 18 points graded here; 3 awaiting hand grading; 5 need a GPU, not graded here; 26 in all`
    (the score and what it is out of, then the other parts where there are any, then the total)."""
    return f"{fraction(parts)} points {LABELS['graded']}{tail(parts)}"


def as_dict(parts: Parts) -> dict[str, float]:
    """{score, graded, by_hand, gpu, total}, rounded as every file shows them (results.json's extra_data)."""
    return {name: rounded(value) for name, value in (*parts._asdict().items(), ("total", parts.total))}


def after_penalty(score: float, penalty: float) -> float:
    """A score after a late penalty (the fraction removed), rounded as every file shows it: computed from the
    raw score whenever a file is written, never stored."""
    return rounded(score * (1 - penalty))
