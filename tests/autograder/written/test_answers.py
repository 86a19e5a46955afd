"""The written-questions format (autograder/written/answers.py): every handout parses, a broken handout is an
error naming its line, and answers.md is graded as the handouts promise: plausible mistakes lose the
points, alternative ways of writing the same number keep them, and tricks gain nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autograder.written import answers as written
from autograder.written.answers import WrittenError, grade_answers, parse_answers, parse_handout

ROOT = Path(__file__).resolve().parents[3]
HANDOUTS = sorted(p.parent.name for p in (ROOT / "solutions").glob("*/README.md"))
TOTALS = {"flash_attention": 15, "resource_accounting": 10}

QUESTION = """## §8 Theory

**T2.** *(3 points)* The question's text.

- **T2.a** *(1 point, ±1%)*: the ridge point, in FLOP/byte.
- **T2.b** *(1 point, exact)*: the first whole batch size.

*Rubric (1 point):*
- *(1)* the reasoning.

### BEGIN SOLUTION
T2.a = 295.34
T2.b = 319
The model answer.
### END SOLUTION

**T3.** *(0.5 points)* All numeric.

- **T3.a** *(0.5 points, ±0.1)*: a fraction in percent.

### BEGIN SOLUTION
T3.a = 50.39
### END SOLUTION

## §9 Next
"""


def answers(t2a: str = "295.34", t2b: str = "319", t3a: str = "50.4", prose: str = "Because.") -> bytes:
    return (f"# Written answers\n\n## T2\n\nT2.a = {t2a}\nT2.b = {t2b}\n\nAnswer:\n{prose}\n\n"
            f"## T3\n\nT3.a = {t3a}\n").encode()


def graded(data: bytes) -> dict[str, tuple[str, float, str]]:
    results = grade_answers("a", parse_handout(QUESTION), parse_answers(data))
    return {r.name: (r.status, r.points, r.message) for r in results}


@pytest.mark.parametrize("assignment", HANDOUTS)
def test_every_handout_parses_and_its_points_add_up(assignment):
    questions = written.handout_questions(assignment)
    for question in questions:
        parts = sum(p.points for p in question.parts)
        assert parts + question.rubric_points == question.points
        assert sum(c.points for c in question.criteria) == question.rubric_points
        assert all(p.key is not None for p in question.parts)
    if assignment in TOTALS:
        assert sum(q.points for q in questions) == TOTALS[assignment]


@pytest.mark.parametrize("assignment", sorted(TOTALS))
def test_the_model_answers_score_every_numeric_part(assignment):
    questions = written.handout_questions(assignment)
    model = (ROOT / "solutions" / assignment / "answers.md").read_bytes()
    results = grade_answers(assignment, questions, parse_answers(model))
    numeric = [r for r in results if r.name.count(".") > r.name.count("written/Q")]
    assert numeric and all(r.status == "passed" for r in results if r.status != "manual")
    assert {r.name for r in results if r.status == "manual"} == {f"written/{q.id}" for q in questions
                                                                 if q.rubric_points}


def test_the_template_scores_nothing():
    template = written.answers_template("a", parse_handout(QUESTION)).encode()
    assert all(points == 0 and status == "not_implemented" for status, points, _ in graded(template).values())


def test_the_parsed_question_has_its_parts_keys_and_rubric():
    t2, t3 = parse_handout(QUESTION)
    assert (t2.id, t2.points, t2.rubric_points, [p.key for p in t2.parts]) == ("T2", 3, 1, [295.34, 319])
    assert (t2.parts[0].tolerance.kind, t2.parts[0].tolerance.value, t2.parts[1].tolerance.kind) == ("relative", 1, "exact")
    assert t2.model_answer == "The model answer." and t2.criteria[0].text == "the reasoning."
    assert (t3.rubric_points, t3.parts[0].tolerance.kind) == (0, "absolute")


BROKEN = [
    ("**T2.** *(3 points)*", "**T2.** *(3 pts)*", 3, "question header"),
    ("- **T2.a** *(1 point, ±1%)*", "- **T2.a** *(1 point, ±one%)*", 5, "tolerance"),
    ("- **T2.a** *(1 point, ±1%)*", "- **T4.a** *(1 point, ±1%)*", 5, "name it T2.a"),
    ("- *(1)* the reasoning.", "- *(2)* the reasoning.", 3, "criteria add up to 2"),
    ("*Rubric (1 point):*\n- *(1)* the reasoning.", "*Rubric (1 point):* 1 for the reasoning.", 8, "rubric line"),
    ("T2.b = 319\n", "", 3, "no key for T2.b"),
    ("T2.b = 319", "T2.b = 319.5", 13, "whole number"),
    ("T2.b = 319", "T2.b = about 319", 13, "not a number"),
    ("T2.b = 319\nThe model answer.", "The model answer.\nT2.b = 319", 14, "after the model answer"),
    ("T3.a = 50.39", "T3.a = 50.39\nT3.b = 1", 23, "not a part of T3"),
    ("**T3.** *(0.5 points)*", "**T2.** *(0.5 points)*", 19, "name it T2.a"),
    ("**T3.** *(0.5 points)*", "**T3.** *(1 point)*", 17, "parts add up to 0.5"),
    ("- *(1)* the reasoning.\n", "- *(1)* the reasoning.\nShow your work.\n", 10, "between its parts or rubric"),
    ("### END SOLUTION\n", "### END SOLUTION\n### BEGIN SOLUTION\nx\n### END SOLUTION\n", 16, "second solution block"),
    ("## §9 Next", "**T2.** *(1 point)* again\n\n*Rubric (1 point):*\n- *(1)* x", 25, "already defined at line 3"),
]


@pytest.mark.parametrize("old, new, line, words", BROKEN, ids=[b[3] for b in BROKEN])
def test_a_broken_handout_names_the_line_and_the_fix(old, new, line, words):
    assert old in QUESTION
    with pytest.raises(WrittenError) as caught:
        parse_handout(QUESTION.replace(old, new, 1), "x/README.md")
    assert caught.value.line == line and words in str(caught.value) and str(caught.value).startswith(f"x/README.md:{line}:")


def test_text_after_a_solution_block_stays_with_its_question():
    assert [q.id for q in parse_handout(QUESTION.replace("### END SOLUTION\n", "### END SOLUTION\nA note.\n", 1))] \
        == ["T2", "T3"]


def test_questions_in_a_code_fence_and_other_bold_lines_are_not_questions():
    text = "```\n**T9.** *(1 point)* shown as an example\n```\n**N1.** The FLOPs, graded by the tests.\n"
    assert parse_handout(text) == []


@pytest.mark.parametrize("t2a, t2b", [
    ("295.34", "319"), ("295.3 FLOP/byte", "319 sequences"), ("2.9534e2", "3.19e2"), ("2.9534 x 10^2", "319"),
    ("296", "319, because the ridge"), ("  295.34", "3_19"), ("292.5", "319.0"), ("2.9534 * 10**2", "3.19·10²"),
    ("2953.4 × 10⁻¹", "3.19 × 10^+2"), ("29534 x 10^−2", "319")])
def test_other_ways_of_writing_the_right_number_keep_the_points(t2a, t2b):
    result = graded(answers(t2a, t2b))
    assert result["written/T2.a"][:2] == ("passed", 1) and result["written/T2.b"][:2] == ("passed", 1)


def test_powers_of_ten_and_powers_are_read_and_a_product_is_not_one():
    """`x 10^k`, `* 10**k` and superscript exponents (as the handouts write 2⁻²⁵) scale by powers of ten, and a
    power alone (2^26) is its value; a product of two numbers that is not a power of ten reads as its first number,
    as any other trailing text does."""
    assert [written.first_number(t) for t in ("1.5·10¹²", "2.0 × 10⁻³ s", "1.5 * 10**12", "1.5*10**-2", "6 x 10^−1")] \
        == [1.5e12, 2.0e-3, 1.5e12, 0.015, 0.6]
    assert [written.first_number(t) for t in ("2 * 10", "3 x 4", "85.9%", "10 x 10")] == [2, 3, 85.9, 10]
    # A power alone, as the handouts write sizes: 2^26, 2**26, 2²⁶ elements; 10¹² FLOPs; 2⁻²⁵.
    assert [written.first_number(t) for t in ("2^26", "2**26 elements", "2²⁶ elements", "10¹²", "2⁻²⁵", "-2^3")] \
        == [2 ** 26, 2 ** 26, 2 ** 26, 1e12, 2 ** -25, -8]
    assert [written.first_number(t) for t in ("10^400", "0^-1")] == [None, None]  # too large, undefined: no number


def test_thousands_separators_are_read():
    assert [written.first_number(t) for t in ("8,589,934,592 bytes", "8_589_934_592", "8 589 934 592", "-1.5e-3")] \
        == [8589934592, 8589934592, 8589934592, -0.0015]


@pytest.mark.parametrize("t2a, t2b, lost, words", [
    ("300", "319", "written/T2.a", "within ±1% of the key; got 300"),
    ("295.34", "318", "written/T2.b", "exactly of the key; got 318"),
    ("295.34", "319.5", "written/T2.b", "whole number"),
    ("n/a", "319", "written/T2.a", "found 'n/a'"),
    ("about three hundred", "319", "written/T2.a", "found 'about three hundred'"),
    ("295.34", "", "written/T2.b", "not answered yet"),
])
def test_a_wrong_missing_or_unreadable_number_loses_its_points(t2a, t2b, lost, words):
    result = graded(answers(t2a, t2b))
    assert result[lost][0] in ("failed", "not_implemented") and result[lost][1] == 0, result[lost]
    assert words in result[lost][2], result[lost]
    assert sum(points for _, points, _ in result.values()) == 2.5 - 1


def test_an_answer_under_the_wrong_id_or_heading_loses_its_points():
    swapped = graded(answers("319", "295.34"))
    assert swapped["written/T2.a"][0] == swapped["written/T2.b"][0] == "failed"
    moved = b"## T2\n\nT2.b = 319\n\n## T3\n\nT2.a = 295.34\nT3.a = 50.4\n"
    result = graded(moved)
    assert result["written/T2.a"][0] == "failed" and "no line `T2.a =` under `## T2`" in result["written/T2.a"][2]
    assert result["written/T3.a"][0] == "passed"


def test_a_repeated_heading_or_line_answers_nothing():
    twice = answers() + b"\n## T2\n\nT2.a = 1\n"
    result = graded(twice)
    assert result["written/T2.a"][:2] == ("failed", 0) and "answered on 2 lines" in result["written/T2.a"][2]
    assert result["written/T2.b"][0] == "passed"
    both = answers(t2a="300\nT2.a = 295.34")
    assert graded(both)["written/T2.a"][:2] == ("failed", 0)


def test_the_templates_empty_line_is_no_answer_and_a_number_below_it_is_pointed_at():
    """An empty `T2.a =` line left beside an answered one is not a second answer; left alone, with the number
    written below `Answer:`, the feedback says where to move it; two written lines still answer nothing."""
    kept = graded(answers(t2a="\nT2.a = 295.34"))
    assert kept["written/T2.a"][:2] == ("passed", 1), kept["written/T2.a"]
    below = graded(answers(t2a="", prose="295.34, since the ridge is peak over bandwidth."))
    status, points, message = below["written/T2.a"]
    assert (status, points) == ("not_implemented", 0) and "answered on" not in message, message
    assert "a number appears below `Answer:` ('295.34, since" in message and "write it after `T2.a =`" in message
    assert graded(answers(t2a=""))["written/T2.a"][2].endswith("expected a number after `T2.a =`; found 'nothing'")
    two = graded(answers(t2a="300\nT2.a = 295.34\nT2.a ="))["written/T2.a"]
    assert two[:2] == ("failed", 0) and "answered on 2 lines" in two[2], two


def test_the_prose_waits_for_a_grader_and_an_empty_prose_scores_nothing():
    result = grade_answers("a", parse_handout(QUESTION), parse_answers(answers(prose="Since x.\n### Why\nmore")))
    prose = next(r for r in result if r.name == "written/T2")
    assert (prose.status, prose.points, prose.max_points) == ("manual", 0, 1)
    assert prose.answer == "Since x.\n### Why\nmore"  # numeric lines and the Answer: line left out
    assert graded(answers(prose=""))["written/T2"][:2] == ("not_implemented", 0)


@pytest.mark.parametrize("data, words", [
    (b"\x00\x01binary" * 10, "not text"),
    (b"## T2\n\nT2.a = 295.34 \xff\n", "not UTF-8"),
    (b"## T2\n" + b"x" * (written.MAX_ANSWERS_BYTES + 1), "larger than"),
])
def test_binary_or_huge_answers_are_refused_with_a_reason(data, words):
    result = graded(data)
    assert all(status == "failed" and points == 0 and words in message for status, points, message in result.values())


def test_a_symlinked_answers_file_is_not_followed(tmp_path):
    (tmp_path / "secret.md").write_bytes(answers())
    package = tmp_path / "a"
    package.mkdir()
    os.symlink(tmp_path / "secret.md", package / "answers.md")
    assert "is a symlink" in written.read_answers(package / "answers.md").problem
    assert "no a/answers.md" in written.read_answers(tmp_path / "b" / "answers.md").problem.replace("no b", "no a")


def test_the_students_copy_of_a_handout_parses_without_keys():
    """The released handout has the stub's placeholder where each solution block was: it parses (for `make
    check-answers`), with the same questions and parts and no key; the authors' parse still demands the keys."""
    from autograder.model.markers import TEXT_STUB, replace_regions

    released = replace_regions(QUESTION, "README.md", lambda region: TEXT_STUB)
    questions = parse_handout(released, released=True)
    assert [(q.id, [p.id for p in q.parts]) for q in questions] == [("T2", ["T2.a", "T2.b"]), ("T3", ["T3.a"])]
    assert all(p.key is None for q in questions for p in q.parts)
    with pytest.raises(WrittenError, match="text between its parts"):
        parse_handout(released)
    for assignment in HANDOUTS:
        stub = written.handout_questions(assignment, ROOT / "assignments", released=True)
        full = written.handout_questions(assignment)
        assert [[p.id for p in q.parts] for q in stub] == [[p.id for p in q.parts] for q in full]
        assert all(p.key is None for q in stub for p in q.parts)
