"""Wording and sanitising shared by the report views.

Messages come from student code (exception text, printed values), so every view treats them as
untrusted: control characters (ANSI escapes among them) and lone surrogates are shown escaped, so
that they can neither drive a terminal, nor make the XML invalid, nor fail to encode as UTF-8.
"""

from __future__ import annotations

import re

from autograder.model.results import TestResult

# What each status means to a reader, in the words the harness uses for its skip reasons.
REASONS = {
    "passed": "passed",
    "failed": "failed",
    "not_implemented": "not implemented yet",
    "error": "error: the test could not run",
    "not_graded": "not graded here: needs a GPU",
    "skipped": "skipped",
    "manual": "to be graded by hand",
    "hand_graded": "graded by hand",
}

# C0 and C1 controls but newline and tab, bidi overrides (they reorder what a reader sees), lone
# surrogates and the two noncharacters XML forbids.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as the start of a formula


def safe_cell(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: a leading formula character is escaped with `'`, and control
    characters are shown as escapes (every student-controlled cell of every CSV goes through it)."""
    text = clean(str(text))
    return "'" + text if text.startswith(FORMULA_START) else text


def from_cell(text: str) -> str:
    """A cell's text as it was before safe_cell: the `'` put before a formula character removed (a sheet's
    `'=half credit` is the comment `=half credit`); any other leading `'` is the writer's own and kept."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_START) else text


def clean(text: str) -> str:
    """`text` with the characters above shown as Python escapes (`\\x1b`, `\\u202e`, `\\ud800`)."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape", "backslashreplace").decode("ascii"), text)


def reason(test: TestResult) -> str:
    return REASONS[test.status]


def explanation(test: TestResult) -> str:
    """The status in words, then the message (unless the message only repeats the status)."""
    message = clean(test.message.strip())
    if test.status == "passed":
        return message
    if not message or message == reason(test):
        return reason(test)
    return f"{reason(test)}\n{message}"


def short_name(test: TestResult) -> str:
    """`test_flops.py::test_matmul[2-3]` for `tests/resource_accounting/test_flops.py::test_matmul[2-3]`."""
    path, sep, rest = test.name.partition("::")
    return path.rsplit("/", 1)[-1] + sep + rest


def name_key(text: str) -> str:
    """A name as matching compares it (the roster's, autograder.cohort.roster; `history STUDENT`): without case,
    each run of spaces, `_`, `-` and `.` one space (`ada_lovelace` is "Ada Lovelace")."""
    return " ".join(part for part in re.split(r"[\s_.\-]+", text.casefold()) if part)


def rounded(value: float) -> float:
    """A number of points as every file shows it: to two decimals, without float noise (151.54999999999998
    is 151.55)."""
    return round(float(value), 2) + 0.0


def points(value: float) -> str:
    value = rounded(value)
    return str(int(value)) if value.is_integer() else f"{value:.2f}".rstrip("0")
