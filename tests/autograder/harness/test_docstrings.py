"""Every test docstring of every assignment gives the student a whole `checks:` line and whole hints, each
tied to the failure it was written for.

The harness shows a failing test's first paragraph ("checks: ...") and the hints written for that failure;
both are read by `hints.parse`, the function the plugin uses, from every test function of the public tests
(tests/<A>/) and the hidden suites (autograder/suites/<A>/), read from the source without importing it.
Each must be a whole sentence: it ends as a sentence or a parenthesis closes it, never on a colon, a
comma or an open parenthesis (which is what a hint cut after its first line, or a first paragraph that
introduces a list, looks like); and a hint's conditions must name kinds of failure the harness knows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autograder.harness.hints import Condition, Hint, parse, shown
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
def test_the_checks_line_and_the_hints_are_whole_sentences(file, name, doc):
    checks, hints = parse(doc)
    assert checks, f"{file}::{name} has no docstring: its first paragraph is what the student sees it check"
    assert whole(checks), f"{file}::{name}: the first paragraph ends mid-sentence: ...{checks[-80:]!r}"
    assert len(hints) == doc.count("Hint"), f"{file}::{name}: a `Hint` line that is not a field (`Hint (...): `)"
    for hint in hints:
        assert hint.text and whole(hint.text), f"{file}::{name}: a hint ends mid-sentence: ...{hint.text[-80:]!r}"


def test_a_hint_runs_on_over_its_lines_until_a_blank_line_or_another_field():
    doc = """softmax(x) equals torch.softmax in float64.

    Hint: subtract the row maximum
        before exp (the sum stays finite).
    Note: not part of the hint.

    Hint (nan): a second hint, for NaN.
    """
    checks, hints = parse(doc)
    assert checks == "softmax(x) equals torch.softmax in float64."
    assert hints == [Hint("subtract the row maximum before exp (the sum stays finite)."),
                     Hint("a second hint, for NaN.", (Condition("nan"),))]


def test_the_checks_line_stops_at_a_hint_without_a_blank_line():
    assert parse("One line.\nHint (scale): two.\n  three.") == ("One line.", [Hint("two. three.", (Condition("scale"),))])


def test_a_hint_is_shown_only_for_the_failure_it_names():
    """No condition: any failed check, not an exception of the code under test; a kind: that kind; quoted
    text: a failed check whose message holds it (with a kind: that kind's); several conditions: any of them."""
    _, hints = parse('Checks.\n\nHint: any check.\nHint (nan): nan.\nHint (scale "lse"): lse scaled.\n'
                     'Hint (raised, did not raise): errors.\nHint ("index (0,"): first element.\n')
    assert shown(hints, "values", "o: 3 of 4 elements differ") == "any check."
    assert shown(hints, "nan", "o: ...") == "any check. nan."
    assert shown(hints, "scale", "o: everywhere got ≈ 2 × expected") == "any check."
    assert shown(hints, "scale", "lse: everywhere got ≈ 1.4427 × expected") == "any check. lse scaled."
    assert shown(hints, "raised", "IndexError: out of range") == "errors."
    assert shown(hints, "did not raise", "DID NOT RAISE ValueError") == "any check. errors."
    assert shown(hints, "values", "worst at index (0, 1)") == "any check. first element."
    assert shown(hints, "raised", "worst at index (0, 1)") == "errors."  # text alone: a failed check


@pytest.mark.parametrize("written", ["Hint (nans): a misspelt kind.", "Hint (nan scale): two kinds in one.",
                                     "Hint (): empty."])
def test_a_condition_the_harness_does_not_know_is_refused(written):
    with pytest.raises(ValueError, match="kind of failure|cannot read"):
        parse(f"Checks.\n\n{written}")


@pytest.mark.parametrize("text", ["it names the argument:", "a list, b list,", "a call (see", "a hint that stops"])
def test_a_cut_sentence_is_not_whole(text):
    assert not whole(text)

