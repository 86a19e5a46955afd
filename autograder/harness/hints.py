"""A test's docstring: what it checks, and its hints, each tied to the failure it was written for.

    def test_forward_matches_float64(...):
        \"\"\"flash_forward_pytorch's o matches float64 attention.

        Hint (values): after every key tile, rescale l and the accumulator by exp(m_old - m_new).
        Hint (nan): a row of NaN saw no key at all (l stayed 0): check the key loop's bounds.
        Hint (scale "lse"): lse is in natural-log units: lse = m + log(l).
        \"\"\"

The check is the first paragraph (up to a blank line or a field). A field is a line that starts with one
capitalised word, optional conditions in parentheses, and a colon (`Hint: ...`, `Hint (nan): ...`); it runs
on over the lines after it until a blank line or another field, so a hint written over several lines reaches
the student whole. A hint's conditions are kinds of failure (autograder.harness.failures: raised, did not
raise, shape, nan, scale, close, values) and quoted text, separated by commas; the hint is shown when any
condition holds, and a condition holds when the failure is of its kind (if it names one) and the failure's
message holds its text (if it quotes one). A hint without conditions is for any failed check of the test
(every kind but "raised": a hint about the values does not explain an exception in the code under test).
A failure no hint was written for shows none.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

from autograder.harness.failures import CHECKED, KINDS

FIELD = re.compile(r"^([A-Z][a-z]+)(?:\s*\(([^)]*)\))?:\s+(.*)$")
CONDITION = re.compile(r'^\s*(?P<kind>[a-z][a-z ]*?)?\s*(?:"(?P<text>[^"]+)")?\s*$')


@dataclass(frozen=True)
class Condition:
    kind: str = ""  # "" for any kind
    text: str = ""  # "" for any message

    def holds(self, kind: str, message: str) -> bool:
        return (self.kind == kind if self.kind else kind in CHECKED) and self.text in message


@dataclass(frozen=True)
class Hint:
    text: str
    conditions: tuple[Condition, ...] = ()

    def applies(self, kind: str, message: str) -> bool:
        if not self.conditions:
            return kind in CHECKED
        return any(condition.holds(kind, message) for condition in self.conditions)


def conditions(text: str) -> tuple[Condition, ...]:
    """`nan, scale "lse"` -> (Condition("nan"), Condition("scale", "lse")); ValueError naming a kind it does not
    know, or a condition it cannot read."""
    found = []
    for part in re.split(r',(?=(?:[^"]*"[^"]*")*[^"]*$)', text):  # commas outside quotes
        match = CONDITION.match(part)
        if match is None or not (match["kind"] or match["text"]):
            raise ValueError(f"cannot read the hint condition {part.strip()!r}: write a kind of failure "
                             f"({', '.join(KINDS)}) and/or quoted text of the failure's message")
        if match["kind"] and match["kind"] not in KINDS:
            raise ValueError(f"{match['kind']!r} is not a kind of failure: one of {', '.join(KINDS)}")
        found.append(Condition(match["kind"] or "", match["text"] or ""))
    return tuple(found)


def parse(doc: str | None) -> tuple[str, list[Hint]]:
    """What a test checks (its first paragraph, on one line) and its hints, from its docstring."""
    lines = [line.strip() for line in inspect.cleandoc(doc or "").splitlines()]
    checks = []
    for line in lines:
        if not line or FIELD.match(line):
            break
        checks.append(line)
    hints: list[tuple[tuple[Condition, ...], list[str]]] = []
    inside = False
    for line in lines:
        field = FIELD.match(line)
        if field:
            inside = field.group(1) == "Hint"
            if inside:
                hints.append((conditions(field.group(2)) if field.group(2) is not None else (), [field.group(3)]))
        elif not line:
            inside = False
        elif inside:
            hints[-1][1].append(line)
    return " ".join(" ".join(checks).split()), [Hint(" ".join(" ".join(words).split()), when) for when, words in hints]


def shown(hints: list[Hint], kind: str, message: str) -> str:
    """The hints written for this failure (of `kind`, with `message`), in the docstring's order, on one line."""
    return " ".join(hint.text for hint in hints if hint.applies(kind, message))
