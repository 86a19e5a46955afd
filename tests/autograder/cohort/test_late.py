"""The late policy (autograder.cohort.late): days late past the grace period, per-day and capped penalties, a
late-day budget spent in order of due dates, times only from the trusted side, and raw and penalised
scores side by side in the gradebook and every export. A toy grader stands in for the real one."""

import csv
import json
import os
import sqlite3
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest

import autograder.grading.client
from autograder.cohort.batch import run_batch
from autograder.cli import main
from autograder.cohort.course import AssignmentPolicy, LateDays, LatePolicy, load_late
from autograder.cohort.late import (ANY, LateError, apply_to_submission, assess, days_late, read_github_events,
                             read_gradescope_metadata, read_times)
from autograder.report import write_all
from autograder.report.gradebook import Gradebook
from autograder.report.gradescope import schema
from tests.autograder.test_cli import fake_grade, toy_pool  # noqa: F401 (fake_grade: a fixture)
from tests.autograder.report.test_gradebook import quiet, toy_grade

PACIFIC = timezone(timedelta(hours=-8))
DUE = datetime(2027, 1, 20, 17, 0, tzinfo=PACIFIC)
COURSE = """
[late_days]
budget = 2
after = "zero"

[assignments.flash_attention]          # listed first, due last: late days go to resource_accounting first
due = 2027-02-10T17:00:00-08:00
rule = "late_days"

[assignments.resource_accounting]
due = "2027-01-20T17:00:00-08:00"
grace_minutes = 15
rule = "late_days"
"""


def per_day(**given) -> AssignmentPolicy:
    return AssignmentPolicy(**{"due": DUE, "rule": "per_day", "grace": timedelta(minutes=15), "per_day": 0.1,
                               **given})


def one(policy: AssignmentPolicy, submitted: datetime, score=10.0):
    entries, warnings = assess(LatePolicy({"a": policy}), {"s": {"a": (score, 10.0)}}, {("s", ANY): submitted})
    assert warnings == []
    return entries[0]


@pytest.mark.parametrize("after_grace, days, penalty", [
    (timedelta(minutes=-1), 0, 0.0),          # one minute inside the grace period: on time
    (timedelta(minutes=1), 1, 0.1),           # one minute after it: one started day
    (timedelta(days=1), 1, 0.1),              # exactly one day after it
    (timedelta(days=1, seconds=1), 2, 0.2),   # a second into the second day
])
def test_days_are_started_days_after_the_grace_period(after_grace, days, penalty):
    entry = one(per_day(), DUE + timedelta(minutes=15) + after_grace)
    assert (entry.days_late, entry.penalty) == (days, pytest.approx(penalty))
    assert entry.penalised == pytest.approx(10 * (1 - penalty))


def test_the_due_date_is_an_instant_whatever_the_offset_of_the_submission_time():
    in_utc = (DUE + timedelta(minutes=14)).astimezone(timezone.utc)  # 01:14 the next day in UTC, still in grace
    assert days_late(in_utc, per_day()) == 0


def test_a_capped_penalty_stops_at_the_cap_and_a_plain_one_at_zero():
    capped = one(per_day(rule="capped", per_day=0.2, cap=0.5), DUE + timedelta(days=5))
    assert (capped.days_late, capped.penalty, capped.penalised) == (5, 0.5, 5.0)
    assert "capped" in capped.note
    plain = one(per_day(per_day=0.3), DUE + timedelta(days=6))
    assert (plain.penalty, plain.penalised) == (1.0, 0.0)


def test_late_days_are_spent_in_order_of_due_date_then_the_assignment_scores_zero(tmp_path):
    (tmp_path / "grading.toml").write_text(COURSE)
    policy = load_late(tmp_path / "grading.toml")
    times = {("alice", "resource_accounting"): DUE + timedelta(minutes=15, days=1, hours=1),  # 2 days late
             ("alice", "flash_attention"): datetime(2027, 2, 10, 18, 0, tzinfo=PACIFIC),    # 1 day late
             ("bob", ANY): DUE - timedelta(days=1)}
    scores = {"alice": {"resource_accounting": (8.0, 10.0), "flash_attention": (9.0, 10.0)},
              "bob": {"resource_accounting": (7.0, 10.0), "flash_attention": (6.0, 10.0)}}
    entries, warnings = assess(policy, scores, times)
    got = {(e.student, e.assignment): (e.days_late, e.late_days_used, e.penalised) for e in entries}
    assert got == {("alice", "resource_accounting"): (2, 2, 8.0), ("alice", "flash_attention"): (1, 0, 0.0),
                   ("bob", "resource_accounting"): (0, 0, 7.0), ("bob", "flash_attention"): (0, 0, 6.0)}
    assert warnings == []
    softer = LatePolicy(policy.assignments, LateDays(budget=2, after=0.25))
    entries, _ = assess(softer, scores, times)
    assert [e.penalised for e in entries if e.student == "alice"] == [8.0, 9.0 * 0.75]


def test_a_student_with_no_time_is_on_time_with_a_warning():
    entries, warnings = assess(LatePolicy({"a": per_day()}), {"s": {"a": (4.0, 10.0)}, "t": {"a": (5.0, 10.0)}},
                               {("s", ANY): DUE + timedelta(days=3)})
    assert [(e.student, e.penalised) for e in entries] == [("s", pytest.approx(2.8)), ("t", 5.0)]
    assert warnings == ["t: no submission time for a: treated as on time"]


@pytest.mark.parametrize("text, expected", [
    ("due = 2027-01-20T17:00:00\nper_day = 0.1", "due: 2027-01-20T17:00:00 has no UTC offset.*add it"),
    ("due = 2027-01-20\nper_day = 0.1", "due: 2027-01-20 is not a date-time"),
    ("due = 'next friday'\nper_day = 0.1", "due: 'next friday' is not an ISO 8601 date-time"),
    ("per_day = 0.1", "due is missing: add e.g. due = "),
    ("due = 2027-01-20T17:00:00Z\nrule = 'perday'", "rule must be one of per_day, capped, late_days, got 'perday'"),
    ("due = 2027-01-20T17:00:00Z\nrule = 'capped'\nper_day = 0.1", "rule = 'capped' needs cap"),
    ("due = 2027-01-20T17:00:00Z\nper_day = 10", r"per_day must be a fraction of the score between 0 and 1 \(0.1"),
    ("due = 2027-01-20T17:00:00Z\nper_day = 0.1\ngrace = 10", "unknown key\\(s\\) grace; the keys are due, grace_min"),
    ("due = 2027-01-20T17:00:00Z\ngrace_minutes = -5\nper_day = 0.1", "grace_minutes must be a number of minutes"),
    ("due = 2027-01-20T17:00:00Z\nrule = 'late_days'", "rule = \"late_days\" needs a \\[late_days\\] table"),
])
def test_a_wrong_policy_names_the_key_and_what_to_do(tmp_path, text, expected):
    from autograder.cohort.course import CourseError

    (tmp_path / "grading.toml").write_text(f"[assignments.resource_accounting]\n{text}\n")
    with pytest.raises(CourseError, match=expected) as info:
        load_late(tmp_path / "grading.toml", ["resource_accounting"])
    assert "[assignments.resource_accounting]" in str(info.value) or "late_days" in str(info.value)


def test_a_misspelt_assignment_or_late_days_key_is_refused(tmp_path):
    from autograder.cohort.course import CourseError

    (tmp_path / "grading.toml").write_text("[assignments.flash_atention]\ndue = 2027-01-20T17:00:00Z\nper_day = 0.1\n")
    with pytest.raises(CourseError, match="flash_atention.: no such assignment; the assignments are flash_attention"):
        load_late(tmp_path / "grading.toml", ["flash_attention", "resource_accounting"])
    (tmp_path / "grading.toml").write_text("[late_days]\nbudget = 2\nthen = 'zero'\n")
    with pytest.raises(CourseError, match=r"\[late_days\]: unknown key\(s\) then; the keys are budget, after"):
        load_late(tmp_path / "grading.toml")
    (tmp_path / "grading.toml").write_text("[cluster]\nexecutor = 'local'\n")
    assert load_late(tmp_path / "grading.toml") is None


def test_the_times_csv_is_checked_line_by_line(tmp_path):
    path = tmp_path / "times.csv"
    path.write_text("student,time,assignment\nalice,2027-01-20T17:00:00-08:00,resource_accounting\n"
                    "bob,2027-01-21T01:00:00Z,\n")
    assert read_times(path) == {("alice", "resource_accounting"): DUE, ("bob", ANY): DUE}
    path.write_text("name,when\nalice,2027-01-20T17:00:00Z\n")
    with pytest.raises(LateError, match="must name the columns student,time"):
        read_times(path)
    path.write_text("student,time\nalice,2027-01-20T17:00:00Z\nbob,2027-01-20 17:00\n")
    with pytest.raises(LateError, match="line 3: 2027-01-20T17:00:00 has no UTC offset"):
        read_times(path)
    path.write_text("student,time\nalice,2027-01-20T17:00:00Z\nalice,2027-01-21T17:00:00Z\n")
    with pytest.raises(LateError, match="line 3: a second time for alice"):
        read_times(path)
    with pytest.raises(LateError, match="does not exist"):
        read_times(tmp_path / "missing.csv")


def test_github_times_are_githubs_clock_never_the_commit_date(tmp_path):
    """A student sets their commit's date (GIT_COMMITTER_DATE); GitHub sets pushed_at when the push arrives."""
    pushed = int((DUE + timedelta(days=2)).timestamp())
    (tmp_path / "alice.json").write_text(json.dumps({
        "ref": "refs/heads/main", "repository": {"name": "hw-alice", "pushed_at": pushed},
        "head_commit": {"timestamp": "2027-01-19T09:00:00-08:00", "message": "done early, honest"}}))
    (tmp_path / "bob.json").write_text(json.dumps([
        {"type": "PushEvent", "created_at": "2027-01-21T02:00:00Z", "payload": {}},
        {"type": "PushEvent", "created_at": "2027-01-20T20:00:00Z", "payload": {}},
        {"type": "IssuesEvent", "created_at": "2027-03-01T00:00:00Z"}]))
    times = read_github_events(tmp_path)
    assert times == {("alice", ANY): DUE + timedelta(days=2), ("bob", ANY): DUE + timedelta(hours=1)}
    (tmp_path / "carol.json").write_text(json.dumps({"head_commit": {"timestamp": "2027-01-19T09:00:00Z"}}))
    with pytest.raises(LateError, match="carol.json: no repository.pushed_at.*a commit's timestamp is set by"):
        read_github_events(tmp_path)


def gradescope_metadata(path: Path, created: str, user_due: str | None) -> Path:
    """The fields of Gradescope's submission_metadata.json that the late policy reads."""
    users = [{"email": "alice@example.edu", "name": "Alice",
              "assignment": {"due_date": user_due, "late_due_date": None}}]
    path.write_text(json.dumps({"id": 1, "created_at": created, "submission_method": "upload",
                                "assignment": {"due_date": "2027-01-20T17:00:00.000000-08:00", "late_due_date": None,
                                               "title": "resource_accounting", "total_points": "3.0"},
                                "users": users, "previous_submissions": []}))
    return path


def test_gradescope_results_json_carries_the_penalised_score_and_says_so(tmp_path):
    report = toy_grade(_answers(tmp_path / "alice", "resource_accounting q0 ok\nresource_accounting q1 ok\n"
                                                    "resource_accounting q2 no\n"))
    out = tmp_path / "results"
    write_all(report, out)
    policy = LatePolicy({"resource_accounting": per_day(per_day=0.25)})
    metadata = gradescope_metadata(tmp_path / "m.json", "2027-01-22T10:00:00.000000-08:00", None)
    assert read_gradescope_metadata(metadata) == (datetime(2027, 1, 22, 10, tzinfo=PACIFIC), DUE)
    lines = apply_to_submission(report, out, policy, metadata)
    results = json.loads((out / "results.json").read_text())
    jsonschema.validate(results, schema())
    assert results["score"] == 1.0 and sum(t["score"] for t in results["tests"]) == 2.0
    assert "2 days late: 50% off: 1 / 3 points after the late policy (raw score 2)" in results["output"]
    assert lines and "raw score 2" in lines[0]
    feedback = (out / "feedback.md").read_text()
    assert feedback.startswith("# Feedback") and "**1 / 3** points after the late policy (raw score 2)" in feedback
    assert json.loads((out / "report.json").read_text())["tests"][0]["points"] == 1.0  # the raw report is kept


def test_a_gradescope_extension_moves_the_due_date(tmp_path):
    report = toy_grade(_answers(tmp_path / "alice", "resource_accounting q0 ok\n"))
    write_all(report, tmp_path / "results")
    metadata = gradescope_metadata(tmp_path / "m.json", "2027-01-22T10:00:00-08:00", "2027-01-23T17:00:00-08:00")
    apply_to_submission(report, tmp_path / "results", LatePolicy({"resource_accounting": per_day()}), metadata)
    assert json.loads((tmp_path / "results" / "results.json").read_text())["score"] == 1.0


def _answers(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "answers.txt").write_text(text)
    return folder


def test_batch_keeps_raw_and_penalised_and_ignores_times_inside_submissions(tmp_path):
    cohort = tmp_path / "cohort"
    _answers(cohort / "alice", "alpha q0 ok\nalpha q1 ok\nbeta r0 ok\n")
    _answers(cohort / "bob", "alpha q0 ok\nbeta r0 no\n")
    _answers(cohort / "carol", "alpha q0 ok\n")
    for name, forged in (("alice", "times.csv"), ("alice", "submission_metadata.json"), ("bob", "pushed.json")):
        (cohort / name / forged).write_text("student,time\nalice,2027-01-01T00:00:00Z\n"
                                            if forged.endswith(".csv") else
                                            json.dumps({"created_at": "2027-01-01T00:00:00Z",
                                                        "repository": {"pushed_at": 0}}))
    policy = LatePolicy({"alpha": per_day(per_day=0.5), "beta": per_day(due=DUE + timedelta(days=7))})
    times = {("alice", ANY): DUE + timedelta(days=1, hours=1), ("bob", "alpha"): DUE}
    out = tmp_path / "out"
    run_batch(cohort, out, grade_fn=toy_grade, console=quiet(), late=(policy, times))
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert {k: rows["alice"][k] for k in ("alpha", "total", "alpha penalised", "beta penalised", "total penalised",
                                          "alpha days late", "beta days late")} == \
        {"alpha": "2.0", "total": "3.0", "alpha penalised": "0.0", "beta penalised": "1.0", "total penalised": "1.0",
         "alpha days late": "2", "beta days late": "0"}  # days late per assignment, never summed
    assert (rows["bob"]["total"], rows["bob"]["total penalised"]) == ("1.0", "1.0")
    feedback = (out / "submissions" / "alice" / "feedback.md").read_text()
    assert "- alpha: submitted 2027-01-21T18:00-08:00, due 2027-01-20T17:00-08:00; 2 days late: 100% off" in feedback
    with Gradebook(out / "gradebook.sqlite") as book:
        assert book.late()["carol"]["alpha"]["note"] == "no submission time: treated as on time"
    run_batch(cohort, out, grade_fn=toy_grade, console=quiet(), late=(policy, times))  # nothing regraded
    assert (out / "submissions" / "alice" / "feedback.md").read_text() == feedback


OLD_SCHEMA_ROW = ("alice", "d1", "graded", 2.0, 3.0, '{"alpha": [2.0, 2.0], "beta": [0.0, 1.0]}', "", "2026-01-01",
                  None)


def test_an_existing_gradebook_gains_the_late_table_and_keeps_its_rows(tmp_path):
    from autograder.report.gradebook import SCHEMA

    path = tmp_path / "gradebook.sqlite"
    with sqlite3.connect(path) as db:  # a gradebook written before the late policy existed
        db.executescript(SCHEMA.split("-- The late policy")[0])
        db.execute("INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", OLD_SCHEMA_ROW)
        assert "late" not in {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    with Gradebook(path) as book:
        assert [r["name"] for r in book.rows()] == ["alice"] and book.late() == {}
        policy = LatePolicy({"alpha": per_day(per_day=0.25)})
        entries, _ = assess(policy, {"alice": {"alpha": (2.0, 2.0)}}, {("alice", ANY): DUE + timedelta(hours=2)})
        book.record_late(entries)
        book.export_csv(tmp_path / "grades.csv")
        assert book.rows()[0]["score"] == 2.0 and book.is_current("alice", "d1")
    row = next(csv.DictReader((tmp_path / "grades.csv").open()))
    assert (row["total"], row["alpha penalised"], row["total penalised"]) == ("2.0", "1.5", "1.5")


def test_the_batch_command_applies_the_policy_and_prints_both(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(autograder.grading.client, "ServerPool", toy_pool(toy_grade))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "160")  # the table on one line per row
    _answers(tmp_path / "c" / "alice", "resource_accounting q0 ok\nresource_accounting q1 ok\n")
    (tmp_path / "times.csv").write_text("student,time\nalice,2027-01-22T17:00:00-08:00\n")
    args = ["batch", "c", "--out", "o", "--times", "times.csv"]
    with pytest.raises(SystemExit):
        main(args)
    assert "the late policy needs a course file" in capsys.readouterr().err
    (tmp_path / "grading.toml").write_text("[assignments.resource_accounting]\ndue = 2027-01-20T17:00:00-08:00\n"
                                           "rule = 'capped'\nper_day = 0.3\ncap = 0.5\n")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "late policy" in out and "2/2" in out and "1/2" in out and "50% off (capped)" in out


def run_autograder_args(tmp_path: Path, with_metadata: bool) -> list[str]:
    """The arguments Gradescope's run_autograder gives the grader (a stand-in python records them)."""
    from autograder.package.gradescope import TEMPLATES

    root = tmp_path / "root"
    (root / "source").mkdir(parents=True)
    (root / "submission" / "resource_accounting").mkdir(parents=True)
    (root / "submission" / "submission_metadata.json").write_text('{"created_at": "2027-01-01T00:00:00Z"}')
    if with_metadata:
        gradescope_metadata(root / "submission_metadata.json", "2027-01-22T10:00:00-08:00", None)
    script = root / "source" / "run_autograder"
    script.write_text((TEMPLATES / "run_autograder").read_text().replace("@ASSIGNMENT@", "resource_accounting"))
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path / "args"}\n')
    python.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": str(python)}
    subprocess.run(["bash", str(script)], env=env, check=True, timeout=60)
    return (tmp_path / "args").read_text().splitlines()


def test_run_autograder_takes_the_time_from_gradescopes_metadata_not_from_the_upload(tmp_path):
    args = run_autograder_args(tmp_path / "with", with_metadata=True)
    metadata = tmp_path / "with" / "root" / "submission_metadata.json"
    assert args[args.index("--submission-metadata") + 1] == str(metadata)
    assert metadata.stat().st_mode & 0o777 == 0o600
    assert "--submission-metadata" not in run_autograder_args(tmp_path / "without", with_metadata=False)


def test_the_grade_command_applies_gradescopes_metadata(tmp_path, capsys, fake_grade, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    submission = _answers(tmp_path / "alice", "resource_accounting q0 ok\nresource_accounting q1 ok\n")
    (tmp_path / "grading.toml").write_text("[assignments.resource_accounting]\ndue = 2027-01-20T17:00:00-08:00\n"
                                           "per_day = 0.25\n")
    metadata = gradescope_metadata(tmp_path / "m.json", "2027-01-21T10:00:00-08:00", None)
    out = tmp_path / "results"
    assert main(["grade", str(submission), "--out", str(out), "--submission-metadata", str(metadata),
                 "--course", str(tmp_path / "grading.toml")]) == 0
    assert json.loads((out / "results.json").read_text())["score"] == 1.5
    assert "1.5 / 2 points after the late policy (raw score 2)" in capsys.readouterr().out
    (tmp_path / "grading.toml").write_text("[cluster]\nexecutor = 'local'\n")  # no late policy: scores stay raw
    assert main(["grade", str(submission), "--out", str(out), "--submission-metadata", str(metadata),
                 "--course", str(tmp_path / "grading.toml")]) == 0
    assert json.loads((out / "results.json").read_text())["score"] == 2.0


def test_the_late_policy_example_of_docs_term_is_valid(tmp_path):
    page = (Path(__file__).resolve().parents[3] / "docs" / "term.md").read_text()
    example = page.split("```toml\n[late_days]", 1)[1].split("```", 1)[0]
    (tmp_path / "grading.toml").write_text("[late_days]" + example)
    policy = load_late(tmp_path / "grading.toml", ["flash_attention", "resource_accounting"])
    assert policy.late_days == LateDays(4, "zero")
    assert policy.assignments["resource_accounting"] == AssignmentPolicy(
        DUE, "capped", timedelta(minutes=15), 0.1, 0.3, DUE + timedelta(days=7), "the last accepted date")


def test_grades_csv_shows_the_late_days_spent_and_left(tmp_path):
    (tmp_path / "grading.toml").write_text(COURSE)
    for name in ("alice", "bob"):
        (tmp_path / "c" / name).mkdir(parents=True)
        (tmp_path / "c" / name / "answers.txt").write_text("resource_accounting q0 ok\nflash_attention q0 ok\n")
    times = {("alice", "resource_accounting"): DUE + timedelta(minutes=15, days=1, hours=1),  # 2 days late
             ("bob", ANY): DUE - timedelta(days=1)}
    run_batch(tmp_path / "c", tmp_path / "out", grade_fn=toy_grade, console=quiet(),
              late=(load_late(tmp_path / "grading.toml"), times))
    rows = {r["submission"]: r for r in csv.DictReader((tmp_path / "out" / "grades.csv").open())}
    assert [(rows[n]["late days spent"], rows[n]["late days left"]) for n in ("alice", "bob")] == [("2", "0"), ("0", "2")]
