"""The answers reach students after the course file's release date, and nothing of them before: in
feedback.md (written by publish), Gradescope's results.json, nbgrader's feedback and the student release.

"Nothing of them" is checked as text: each model answer, each key line of the handout's solution blocks,
the key as the answer key writes it, and the function name of every hidden test (hidden, or visible only
after the due date)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest

from autograder.cohort.publish import publish
from autograder.model.results import GradeReport, TestResult
from autograder.package import gradescope, release
from autograder.package.layout import ROOT
from autograder.report import feedback_markdown, results_json
from autograder.report.gradebook import Gradebook
from autograder.report.gradescope import schema
from autograder.cohort.answers import released_keys
from autograder.report.answers import AnswerKey, key_markdown
from autograder.written.answer_key import answer_key, course_assignments
from autograder.written.answers import Question, handout_questions

RA = "resource_accounting"
RELEASE = datetime(2027, 1, 27, 17, 0, tzinfo=timezone(timedelta(hours=-8)))
BEFORE, AFTER = RELEASE - timedelta(seconds=1), RELEASE + timedelta(days=1)
COURSE = "[answers]\nrelease = 2027-01-27T17:00:00-08:00\n"
IN_PLACE = "test_hidden_flops.py::test_flop_counter_does_not_count_in_place_elementwise_ops"  # after_due_date


def questions(key: AnswerKey) -> list[Question]:
    return handout_questions(key.assignment)


def shown(key: AnswerKey) -> list[str]:
    """The key as students get it: the first line of each model answer, each part's key as written."""
    found = [q.model_answer.splitlines()[0] for q in questions(key) if q.model_answer]
    return found + [f"Key: **{_value(p.key)}**" for q in questions(key) for p in q.parts]


def secrets(key: AnswerKey) -> list[str]:
    """Text of the key that must not leak: what `shown` lists, and the handout's own key lines."""
    return shown(key) + [f"{p.id} = {_value(p.key)}" for q in questions(key) for p in q.parts]


def _value(key: float) -> str:
    return str(int(key)) if float(key).is_integer() else repr(key)


def hidden_names(key: AnswerKey) -> list[str]:
    return [test.function for test in key.hidden]


def failing(index: int, test) -> bool:
    return index % 3 == 0 or test.name == IN_PLACE


def report() -> GradeReport:
    """A resource_accounting report with public, hidden, after-the-due-date and written results."""
    key = answer_key(RA, RELEASE)
    hidden = [TestResult(f"autograder/suites/{RA}/{test.name}", RA, 2, "failed" if failing(i, test) else "passed",
                         message="expected 6, got 7" if failing(i, test) else "", checks=test.checks,
                         visibility="after_due_date" if test.name == IN_PLACE else "hidden")
              for i, test in enumerate(key.hidden)]
    return GradeReport("alice", [
        TestResult(f"tests/{RA}/test_flops.py::test_matmul_flops_is_2mnp", RA, 2, "passed",
                   checks="matmul_flops is 2mnp."),
        TestResult(f"tests/{RA}/test_flops.py::test_flop_counter_counts_mm", RA, 3, "failed", message="got 0"),
        *hidden,
        TestResult("written/Q6.1.a", RA, 0.5, "failed", message="Q6.1.a: expected within ±1% of the key; got 70",
                   task="written"),
        TestResult("written/Q6.1", RA, 1, "manual", message="Q6.1: to be graded by hand (52 characters)",
                   task="written", answer="the weight is read once per step"),
    ], log=["sandbox: bubblewrap active"])


@pytest.fixture
def no_site(monkeypatch):
    """publish without the cohort report (its own tests cover it): only each submission's files."""
    monkeypatch.setattr("autograder.cohort.publish.write_site", lambda out: Path(out) / "report" / "index.html")


@pytest.fixture
def course(tmp_path) -> Path:
    path = tmp_path / "grading.toml"
    path.write_text(COURSE)
    return path


def keys(course: Path, now: datetime) -> dict[str, AnswerKey]:
    return released_keys(course, now)


def assert_none_of(text: str, key: AnswerKey) -> None:
    leaked = [s for s in secrets(key) + hidden_names(key) if s in text]
    assert not leaked, f"leaked before the release: {leaked[:5]}"


def test_feedback_before_the_release_shows_hidden_and_after_the_due_date_tests_only_as_counts(course):
    text = feedback_markdown(report(), keys(course, BEFORE))
    assert_none_of(text, answer_key(RA, RELEASE))
    assert text == feedback_markdown(report())  # nothing released is the default
    concealed = sum(t.status == "failed" for t in report().tests if t.visibility != "visible")
    assert f"## To fix: 2 tests (and {concealed} hidden)" in text and "## Answers" not in text


def test_feedback_after_the_release_holds_the_keys_and_every_hidden_test_with_its_points(course):
    released = keys(course, AFTER)
    text = feedback_markdown(report(), released)
    key = released[RA]
    assert all(s in text for s in shown(key)) and key_markdown(key, 2, report().tests) in text
    for test in key.hidden:
        assert f"- `{test.name}` ({2 * (not failing(key.hidden.index(test), test)):g} / 2): {test.checks}" in text
    assert f"### `{IN_PLACE}`: failed, 0 / 2" in text  # visible after the due date: now shown like the others
    concealed = sum(t.status == "failed" for t in report().tests if t.visibility == "hidden")
    assert f"## To fix: 3 tests (and {concealed} hidden)" in text
    assert text.index("## Answers: `resource_accounting`") < text.index("## Grading notes")


def test_results_json_adds_the_key_after_the_release_as_an_after_due_date_entry(course):
    validator = jsonschema.Draft202012Validator(schema())
    before, after = results_json(report(), keys(course, BEFORE)), results_json(report(), keys(course, AFTER))
    assert before == results_json(report())
    key = answer_key(RA, RELEASE)
    for entry in before["tests"]:
        if entry["visibility"] == "visible":
            assert_none_of(json.dumps(entry, ensure_ascii=False), key)
    assert_none_of(before["output"], key)
    assert not any(s in json.dumps(before, ensure_ascii=False) for s in secrets(key))
    validator.validate(after)
    extra = after["tests"][len(before["tests"]):]
    assert after["tests"][: len(before["tests"])] == before["tests"] and after["score"] == before["score"]
    assert [(e["name"], e["score"], e["max_score"], e["visibility"], e["output_format"], "status" in e)
            for e in extra] == [(f"Answers: {RA} (released 2027-01-27T17:00:00-08:00)", 0, 0, "after_due_date",
                                 "md", False)]
    assert extra[0]["output"] == key_markdown(key, 1, report().tests)


def test_the_gradescope_package_keeps_the_release_date_and_what_the_key_is_read_from(tmp_path, course):
    course.write_text(COURSE + "[assignments.flash_attention]\ndue = 2027-02-10T17:00:00-08:00\nper_day = 0.1\n"
                      "answers_release = 2027-02-12T17:00:00-08:00\n")
    packaged = tmp_path / "zip"
    gradescope.stage(RA, packaged, course)
    staged = released_keys(packaged / "grading.toml", AFTER, solutions=packaged / "solutions",
                           suites=packaged / "autograder" / "suites")
    assert list(staged) == [RA] and staged[RA] == answer_key(RA, RELEASE)
    assert released_keys(packaged / "grading.toml", BEFORE, solutions=packaged / "solutions",
                         suites=packaged / "autograder" / "suites") == {}


def test_publish_writes_the_answers_into_feedback_and_results_only_after_the_release(tmp_path, course, no_site):
    out = tmp_path / "out"
    with Gradebook(out / "gradebook.sqlite") as book:
        book.record("alice", "digest", report())
    key = answer_key(RA, RELEASE)
    publish(out, course=course, now=BEFORE)
    feedback = (out / "submissions" / "alice" / "feedback.md").read_text()
    results = json.loads((out / "submissions" / "alice" / "results.json").read_text())
    assert_none_of(feedback, key)
    assert not any(s in json.dumps(results, ensure_ascii=False) for s in secrets(key))
    publish(out, course=course, now=AFTER)
    feedback = (out / "submissions" / "alice" / "feedback.md").read_text()
    results = json.loads((out / "submissions" / "alice" / "results.json").read_text())
    assert key_markdown(key, 2, report().tests) in feedback
    assert results["tests"][-1]["visibility"] == "after_due_date" and "Key: **319**" in results["tests"][-1]["output"]


def test_the_student_release_holds_the_answers_only_once_released(tmp_path, course):
    names = course_assignments()
    public = "\n".join(p.read_text(encoding="utf-8") for name in names for p in (ROOT / "tests" / name).rglob("*.py"))
    for when, dest in ((BEFORE, tmp_path / "before"), (AFTER, tmp_path / "after")):
        released = keys(course, when)
        files = release.build(dest, released)
        # every file, the binary ones (the staff's measured plots) as what text they may hold
        text = "\n".join((dest / f).read_bytes().decode("utf-8", "replace") for f in files)
        assert sorted(released) == (names if when == AFTER else [])
        for name in names:
            key = answer_key(name, RELEASE)
            hidden_only = [n for n in hidden_names(key) if n not in public]
            assert hidden_only
            if when == BEFORE:
                assert not [f for f in files if f.startswith("answers/")]
                assert_none_of(text, AnswerKey(name, RELEASE, key.written, ()))
                assert not [n for n in hidden_only if n in text]
            else:
                assert (dest / "answers" / f"{name}.md").read_text(encoding="utf-8") == key_markdown(key)
                assert all(s in text for s in shown(key)) and all(n in text for n in hidden_only)


def test_nbgraders_feedback_gets_the_answers_section_only_after_the_release(tmp_path, course):
    pytest.importorskip("nbgrader", reason="nbgrader is an instructor dependency")
    from autograder.package.nbgrader import write_feedback

    nb_course = tmp_path / "nbcourse"
    nb_course.mkdir()
    (nb_course / "nbgrader_config.py").write_text("c = get_config()\n")
    key = answer_key(RA, RELEASE)
    page = write_feedback(nb_course, RA, "alice", RA, report(), keys(course, BEFORE))
    html = page.read_text()
    assert "<h1>Feedback:" in html and "Answers" not in html
    assert not [n for n in hidden_names(key) if n in html]
    assert not [s for s in shown(key) if s.replace("**", "") in html]
    html = write_feedback(nb_course, RA, "alice", RA, report(), keys(course, AFTER)).read_text()
    assert "<h2>Answers: <code>resource_accounting</code></h2>" in html
    assert "Key: <strong>319</strong>" in html and all(n in html for n in hidden_names(key))


def test_the_grade_and_report_verbs_follow_the_course_files_release_date(tmp_path, monkeypatch, no_site):
    import autograder.grading.client as client
    from autograder.cli import main
    from autograder.sandbox.policy import SandboxUnavailable, detect

    try:
        detect()
    except SandboxUnavailable as exc:
        pytest.skip(f"the grade verb refuses to grade here: {exc}")

    def grade(submission, out=None, assignment=None, **options):  # the grader's own files, without grading
        return client._finish(report(), 0.0, out, options.get("released"))

    monkeypatch.setattr(client, "grade", grade)
    (tmp_path / "alice").mkdir()
    for year, released in ((2999, False), (2020, True)):  # the verbs read the clock
        course = tmp_path / f"{year}.toml"
        course.write_text(f"[answers]\nrelease = {year}-01-27T17:00:00-08:00\n")
        out = tmp_path / f"out{year}"
        mine = out / "submissions" / "alice"  # where the batch puts alice's files, which `report` rewrites
        assert main(["grade", str(tmp_path / "alice"), "--out", str(mine), "--course", str(course)]) == 0
        assert ("## Answers: `resource_accounting`" in (mine / "feedback.md").read_text()) == released
        results = json.loads((mine / "results.json").read_text())
        assert (results["tests"][-1]["visibility"] == "after_due_date") == released
        with Gradebook(out / "gradebook.sqlite") as book:
            book.record("alice", "digest", report())
        assert main(["report", str(out), "--course", str(course)]) == 0
        assert ("## Answers: `resource_accounting`" in (mine / "feedback.md").read_text()) == released
