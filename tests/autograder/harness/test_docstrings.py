"""Every test docstring of every assignment gives the student a whole `checks:` line and a whole hint.

The harness shows a failing test's first paragraph ("checks: ...") and its `Hint:`; both are read by
`checks_and_hint`, the function the plugin uses, from every test function of the public tests
(tests/<A>/) and the hidden suites (autograder/suites/<A>/), read from the source without importing it.
Each must be a whole sentence: it ends as a sentence or a parenthesis closes it, never on a colon, a
comma or an open parenthesis (which is what a hint cut after its first line, or a first paragraph that
introduces a list, looks like).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autograder.harness.plugin import checks_and_hint
from kernels.course import packages

ROOT = Path(__file__).resolve().parents[3]
ENDINGS = (".", ")", "?", "!")


def docstrings() -> list[tuple[str, str, str]]:
    """(file, test name, docstring) of every test function of every assignment's public tests and hidden suite."""
    found = []
    for package in packages():
        for folder in (ROOT / "tests" / package, ROOT / "autograder" / "suites" / package):
            for path in sorted(folder.glob("test_*.py")):
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                    if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                        found.append((path.relative_to(ROOT).as_posix(), node.name, ast.get_docstring(node) or ""))
    return found


TESTS = docstrings()


def whole(sentence: str) -> bool:
    return sentence.endswith(ENDINGS)


def test_every_assignment_has_test_docstrings_to_check():
    assert {file.split("/")[1] if file.startswith("tests/") else file.split("/")[2] for file, _, _ in TESTS} \
        == set(packages())


@pytest.mark.parametrize("file, name, doc", TESTS, ids=[f"{f.rsplit('/', 1)[1]}::{n}" for f, n, _ in TESTS])
def test_the_checks_line_and_the_hint_are_whole_sentences(file, name, doc):
    checks, hint = checks_and_hint(doc)
    assert checks, f"{file}::{name} has no docstring: its first paragraph is what the student sees it check"
    assert whole(checks), f"{file}::{name}: the first paragraph ends mid-sentence: ...{checks[-80:]!r}"
    if "Hint:" in doc:
        assert hint and whole(hint), f"{file}::{name}: the hint ends mid-sentence: ...{hint[-80:]!r}"


def test_a_hint_runs_on_over_its_lines_until_a_blank_line_or_another_field():
    doc = """softmax(x) equals torch.softmax in float64.

    Hint: subtract the row maximum
        before exp (the sum stays finite).
    Note: not part of the hint.

    Hint: only the first hint counts.
    """
    checks, hint = checks_and_hint(doc)
    assert checks == "softmax(x) equals torch.softmax in float64."
    assert hint == "subtract the row maximum before exp (the sum stays finite). only the first hint counts."


def test_the_checks_line_stops_at_a_hint_without_a_blank_line():
    assert checks_and_hint("One line.\nHint: two.\n  three.") == ("One line.", "two. three.")


@pytest.mark.parametrize("text", ["it names the argument:", "a list, b list,", "a call (see", "a hint that stops"])
def test_a_cut_sentence_is_not_whole(text):
    assert not whole(text)
