"""The answer key and its release date: the course file's [answers] release and answers_release, the key
read from the handout and the hidden suite's source, and `make answers`' bundle."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autograder.cohort.course import CourseError, check, load_answers_release
from autograder.model.results import TestResult
from autograder.cohort.answers import main, released_keys
from autograder.report.answers import key_markdown
from autograder.written.answer_key import answer_key, course_assignments, hidden_tests
from autograder.written.answers import handout_questions

KNOWN = ["flash_attention", "gpu_kernels", "resource_accounting"]
PACIFIC = timezone(timedelta(hours=-8))
RELEASE = datetime(2027, 1, 27, 17, 0, tzinfo=PACIFIC)
COURSE = """
[answers]
release = 2027-01-27T17:00:00-08:00

[assignments.resource_accounting]
due = 2027-01-20T17:00:00-08:00
per_day = 0.1

[assignments.flash_attention]
due = 2027-02-10T17:00:00-08:00
per_day = 0.1
answers_release = "2027-02-12T17:00:00-08:00"
"""


def course(tmp_path: Path, text: str = COURSE) -> Path:
    path = tmp_path / "grading.toml"
    path.write_text(text)
    return path


def test_the_release_date_applies_to_every_assignment_unless_its_section_sets_its_own(tmp_path):
    dates = load_answers_release(course(tmp_path), KNOWN)
    assert dates == {"resource_accounting": RELEASE, "gpu_kernels": RELEASE,
                     "flash_attention": datetime(2027, 2, 12, 17, 0, tzinfo=PACIFIC)}
    check(course(tmp_path), KNOWN)  # the whole file, [answers] and answers_release included, is valid


def test_without_a_release_date_nothing_is_ever_released(tmp_path):
    only_own = "[assignments.gpu_kernels]\ndue = 2027-01-20T17:00:00Z\nanswers_release = 2027-01-21T17:00:00Z\n"
    assert load_answers_release(course(tmp_path, only_own), KNOWN) == {
        "gpu_kernels": datetime(2027, 1, 21, 17, 0, tzinfo=timezone.utc)}
    assert load_answers_release(course(tmp_path, "[grading]\nseed_secret = 'x'\n"), KNOWN) == {}
    far_future = datetime(9999, 1, 1, tzinfo=timezone.utc)
    assert released_keys(course(tmp_path, "[grading]\nseed_secret = 'x'\n"), far_future) == {}
    assert released_keys(None, far_future) == {}


@pytest.mark.parametrize("text, says", [
    ("[answers]\nrelease = 2027-01-27T17:00:00\n", "[answers] release: 2027-01-27T17:00:00 has no UTC offset"),
    ("[answers]\nrelease = 2027-01-27\n", "[answers] release: 2027-01-27 is not a date-time"),
    ("[answers]\nrelease = 'next week'\n", "[answers] release: 'next week' is not an ISO 8601 date-time"),
    ("[answers]\nrelaese = 2027-01-27T17:00:00Z\n", "unknown key(s) in [answers]: relaese"),
    ("answers = 3\n", "'answers' must be a table"),
    ("[assignments.gpu_kernels]\ndue = 2027-01-20T17:00:00Z\nanswers_release = 2027-01-19T17:00:00Z\n",
     "[assignments.gpu_kernels] answers_release: 2027-01-19T17:00:00+00:00 is before gpu_kernels's due date"),
    ("[answers]\nrelease = 2027-01-27T17:00:00-08:00\n[assignments.flash_attention]\ndue = 2027-02-10T17:00:00Z\n",
     "[answers] release: 2027-01-27T17:00:00-08:00 is before flash_attention's due date"),
    ("[answers]\nrelease = 2027-01-27T17:00:00Z\n[[extensions]]\nstudent = 's002'\nassignment = 'gpu_kernels'\n"
     "due = 2027-01-29T17:00:00Z\nreason = 'ill'\n", "is before s002's extended due date 2027-01-29T17:00:00+00:00"),
])
def test_a_wrong_release_date_is_refused_with_the_key_named(tmp_path, text, says):
    with pytest.raises(CourseError) as error:
        load_answers_release(course(tmp_path, text), KNOWN)
    assert says in str(error.value)


def test_a_key_is_released_at_its_date_and_not_a_second_before(tmp_path):
    path = course(tmp_path)
    assert released_keys(path, RELEASE - timedelta(seconds=1)) == {}
    assert sorted(released_keys(path, RELEASE)) == ["gpu_kernels", "resource_accounting"]
    later = datetime(2027, 2, 12, 17, 0, tzinfo=PACIFIC)
    assert sorted(released_keys(path, later)) == KNOWN
    assert sorted(released_keys(path, later, assignments=["flash_attention"])) == ["flash_attention"]
    with pytest.raises(ValueError, match="UTC offset"):
        released_keys(path, datetime(2027, 3, 1))


def test_the_hidden_tests_are_read_from_the_suites_source_with_what_each_checks(tmp_path):
    suite = tmp_path / "suites" / "toy"
    suite.mkdir(parents=True)
    (suite / "test_b.py").write_text('import os\n\ndef helper():\n    """Not a test."""\n\n\n'
                                     'def test_sizes_random(student):\n    """Sizes are right\n    at random.\n\n'
                                     '    Hint: not this.\n    """\n\n\ndef test_no_doc():\n    pass\n')
    (suite / "test_a.py").write_text('raise SystemExit("never imported")\n\ndef test_first():\n    "One line."\n')
    (suite / "scenarios.py").write_text("def test_not_in_a_test_file():\n    pass\n")
    tests = hidden_tests("toy", tmp_path / "suites")
    assert [(t.name, t.checks) for t in tests] == [("test_a.py::test_first", "One line."),
                                                   ("test_b.py::test_sizes_random", "Sizes are right at random."),
                                                   ("test_b.py::test_no_doc", "no doc")]


def test_the_real_suites_give_every_hidden_test_its_description():
    for assignment in course_assignments():
        tests = hidden_tests(assignment)
        assert len(tests) > 10 and len({t.name for t in tests}) == len(tests)
        assert all(t.checks and t.file.startswith("test_") for t in tests)
    flops = {t.name: t.checks for t in hidden_tests("resource_accounting")}
    assert flops["test_hidden_flops.py::test_flop_counter_does_not_count_in_place_elementwise_ops"].startswith(
        "With count_elementwise=True, in-place add_, sub_, mul_ and div_")


def test_the_key_shows_each_part_s_key_the_rubric_the_model_answer_and_each_hidden_test():
    key = answer_key("resource_accounting", RELEASE)
    text = key_markdown(key)
    questions = handout_questions("resource_accounting")
    assert questions and text.startswith("# Answers: `resource_accounting`\n\nReleased 2027-01-27T17:00:00-08:00")
    assert "- **Q6.1.a** (0.5 points, within ±1%): `decode_arithmetic_intensity(64, 8192, 2)`, in FLOP/byte. " \
           "Key: **63.02**" in text
    assert "- **Q6.1.e** (1 point, exactly): the first whole batch size at which decoding reaches the ridge. " \
           "Key: **319**" in text
    for question in questions:
        assert question.model_answer in text and all(c.text in text for c in question.criteria)
    for test in key.hidden:
        assert f"- `{test.name}`: {test.checks}" in text


def test_with_a_student_s_results_each_hidden_test_shows_its_points():
    key = answer_key("resource_accounting", RELEASE)
    first, second = key.hidden[0], key.hidden[1]
    results = [TestResult(f"autograder/suites/resource_accounting/{first.name}[{i}]", "resource_accounting", 1,
                          "passed" if i else "failed", visibility="hidden") for i in range(3)]
    results.append(TestResult(f"autograder/suites/resource_accounting/{second.name}", "resource_accounting", 2,
                              "passed", visibility="hidden"))
    text = key_markdown(key, 2, results)
    assert text.startswith("## Answers") and "\n### Written questions\n\n**Q6.1** (4 points). Why is" in text
    assert f"- `{first.name}` (2 / 3): {first.checks}" in text
    assert f"- `{second.name}` (2 / 2): {second.checks}" in text
    assert f"- `{key.hidden[2].name}`: " in text


def test_make_answers_writes_the_released_assignments_only_and_empties_its_folder(tmp_path, capsys):
    path, dest = course(tmp_path), tmp_path / "build" / "answers"
    dest.mkdir(parents=True)
    (dest / "flash_attention.md").write_text("a preview of an earlier build")
    assert main([str(dest), "--course", str(path), "--now", "2027-01-28T00:00:00-08:00"]) == 0
    assert sorted(p.name for p in dest.iterdir()) == ["gpu_kernels.md", "resource_accounting.md"]
    assert (dest / "gpu_kernels.md").read_text() == key_markdown(answer_key("gpu_kernels", RELEASE))
    out = capsys.readouterr().out
    assert "flash_attention: its answers are released at 2027-02-12T17:00:00-08:00, not yet: not written" in out
    assert main([str(dest), "--course", str(path), "--now", "2027-01-27T16:59:59-08:00"]) == 0
    assert list(dest.iterdir()) == []


def test_make_answers_without_a_course_file_or_with_a_wrong_one_says_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "answers")])
    assert stop.value.code == 2 and "[answers] release = 2027-01-27T17:00:00-08:00" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path / "answers"), "--course", str(course(tmp_path, "[answers]\nrelease = 2027-01-27\n"))])
    assert "[answers] release: 2027-01-27 is not a date-time" in capsys.readouterr().err
    assert not (tmp_path / "answers").exists()
