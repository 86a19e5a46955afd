"""Every file a reader sees is derived from the gradebook (autograder.cohort.publish), whatever happened before.

A property: any sequence of batch, regrade, changed submissions, hand grading and new submission times leaves
feedback.md, results.json, report.json, junit.xml, grades.csv and the cohort report saying what the gradebook
holds, with one denominator (autograder.report.parts), penalised scores computed from the current raw ones, no
float noise, and "not gradable" submissions listed with their reason, never a score. The expected numbers are
read from the gradebook with sqlite3, apart from the code under test. A toy grade function stands in for the
grader. The examples are the same on every run (derandomize), and one of them always grades a written answer
by hand: the step that changes the stored report after the batch wrote the files.

answers.txt of a toy submission: one line per test, `assignment question answer`; answer ok passes, no
fails, gpu needs a GPU (not graded here), hand is a written answer awaiting hand grading; a submission whose
answers.txt says `corrupt` is not gradable.
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3
import tempfile
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from autograder.cohort.batch import run_batch
from autograder.cohort.course import AssignmentPolicy, LatePolicy
from autograder.cohort.late import ANY
from autograder.cohort.publish import publish
from autograder.model.results import GradeReport, TestResult
from autograder.report.gradebook import Gradebook, answer_digest, store_manual
from autograder.report.text import points
from tests.autograder.report.test_gradebook import quiet

DUE = datetime(2027, 1, 20, 17, 0, tzinfo=timezone(timedelta(hours=-8)))
POLICY = LatePolicy({"alpha": AssignmentPolicy(DUE, "per_day", per_day=0.1),
                     "beta": AssignmentPolicy(DUE + timedelta(days=7), "capped", per_day=0.15, cap=0.4)})
MAX = {"ok": 1.1, "no": 1.1, "gpu": 2.5, "hand": 1.5}  # 1.1: sums with float noise (3.3000000000000003)
STATUS = {"ok": "passed", "no": "failed", "gpu": "not_graded", "hand": "manual"}
NAMES = ("ann", "ben", "cat")


def toy_grade(path: Path) -> GradeReport:
    text = (path / "answers.txt").read_text()
    if text.strip() == "corrupt":
        return GradeReport(path.name, log=["toy grader"], not_gradable=f"{path.name}.zip is a corrupt zip: zip it again")
    tests = []
    for line in text.splitlines():
        assignment, question, answer = line.split()
        name = f"written/{question}" if answer == "hand" else f"tests/{assignment}/test_toy.py::test_{question}"
        tests.append(TestResult(name, assignment, MAX[answer], STATUS[answer],
                                answer=f"answer to {question}" if answer == "hand" else ""))
    return GradeReport(path.name, tests, log=["toy grader"])


answers = st.lists(st.sampled_from(tuple(MAX)), min_size=2, max_size=6)
submission = st.one_of(st.just(None), answers)  # None: a corrupt submission
step = st.one_of(
    st.tuples(st.just("batch"), st.booleans()),  # with the times, or without
    st.tuples(st.just("regrade"), st.sampled_from(NAMES)),
    st.tuples(st.just("change"), st.sampled_from(NAMES), submission),
    st.tuples(st.just("hand"), st.sampled_from(NAMES), st.floats(0, 1.5).map(lambda x: round(x, 1))),
    st.tuples(st.just("times"), st.lists(st.integers(-2, 5), min_size=3, max_size=3)),
)


def write(cohort: Path, name: str, answers_of: list[str] | None) -> None:
    (cohort / name).mkdir(parents=True, exist_ok=True)
    lines = [f"{'alpha' if i % 2 == 0 else 'beta'} q{i} {a}" for i, a in enumerate(answers_of)] if answers_of else []
    (cohort / name / "answers.txt").write_text("\n".join(lines) + "\n" if lines else "corrupt\n")


def times_of(days: list[int]) -> dict:
    return {(name, ANY): DUE + timedelta(days=d, minutes=1) for name, d in zip(NAMES, days)}


def hand_grade(out: Path, name: str, value: float) -> None:
    """What `manual import` does: store hand scores of the current answers, then write every file again."""
    with Gradebook(out / "gradebook.sqlite") as book:
        report = book.report(name)
        tests = [t for t in report.tests if t.status in ("manual", "hand_graded")] if report else []
        if tests:
            store_manual(book, [{"submission": name, "question": t.name, "criteria": [value], "comment": "",
                                 "answer_sha": answer_digest(t.answer)} for t in tests])
    publish(out)


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@example(start=[["hand", "ok", "no"], ["gpu", "hand"], None], steps=[("hand", "ann", 0.7), ("batch", True)],
         days=[1, 0, 3])
@given(start=st.lists(submission, min_size=3, max_size=3), steps=st.lists(step, min_size=1, max_size=4),
       days=st.lists(st.integers(-2, 5), min_size=3, max_size=3))
def test_every_file_agrees_with_the_gradebook_after_any_steps(start, steps, days):
    with tempfile.TemporaryDirectory() as tmp:
        cohort, out = Path(tmp) / "cohort", Path(tmp) / "out"
        for name, answers_of in zip(NAMES, start):
            write(cohort, name, answers_of)
        times = times_of(days)
        run_batch(cohort, out, grade_fn=toy_grade, console=quiet(), late=(POLICY, times))
        check(out)
        for kind, *args in steps:
            if kind == "batch":
                run_batch(cohort, out, grade_fn=toy_grade, console=quiet(), late=(POLICY, times) if args[0] else None)
            elif kind == "regrade":
                run_batch(cohort, out, grade_fn=toy_grade, console=quiet(), regrade=(args[0],))
            elif kind == "change":
                write(cohort, *args)
                run_batch(cohort, out, grade_fn=toy_grade, console=quiet())
            elif kind == "hand":
                hand_grade(out, *args)
            else:
                times = times_of(args[0])
                run_batch(cohort, out, grade_fn=toy_grade, console=quiet(), late=(POLICY, times))
            check(out)


def stored(out: Path) -> tuple[dict, dict, dict]:
    """From the gradebook, with sqlite3: {name: (status, message)}, {name: {assignment: [score, graded, by hand,
    gpu]}} and {name: {assignment: (penalty, days late)}}."""
    db = sqlite3.connect(out / "gradebook.sqlite")
    try:
        rows = {n: (s, m) for n, s, m in db.execute("SELECT name, status, message FROM submissions")}
        parts: dict[str, dict[str, list[float]]] = {}
        for name, assignment, status, got, most in db.execute(
                "SELECT submission, assignment, status, points, max_points FROM tests"):
            mine = parts.setdefault(name, {}).setdefault(assignment, [0.0, 0.0, 0.0, 0.0])
            column = {"manual": 2, "not_graded": 3}.get(status, 1)
            mine[column] += most
            mine[0] += got
        late: dict[str, dict] = {}
        for name, assignment, penalty, days in db.execute("SELECT submission, assignment, penalty, days_late FROM late"):
            late.setdefault(name, {})[assignment] = (penalty, days)
    finally:
        db.close()
    return rows, parts, late


# junit.xml's element for each status (autograder/report/junit.py); the others (passed, hand_graded) pass
JUNIT = {"failed": "failures", "not_implemented": "failures", "error": "errors", "not_graded": "skipped",
         "skipped": "skipped", "manual": "skipped"}


def check_reports(out: Path) -> None:
    """Each submission's report.json is the gradebook's stored report (and its test rows), and its junit.xml
    counts the failures, skips and passes the gradebook holds."""
    db = sqlite3.connect(out / "gradebook.sqlite")
    try:
        reports = {n: json.loads(r) if r else None for n, r in db.execute("SELECT name, report FROM submissions")}
        rows: dict[str, list[tuple]] = {name: [] for name in reports}
        for name, test, status, got in db.execute(
                "SELECT submission, name, status, points FROM tests ORDER BY submission, position"):
            rows[name].append((test, status, got))
    finally:
        db.close()
    for name, report in reports.items():
        folder = out / "submissions" / name
        written = json.loads((folder / "report.json").read_text())
        assert report is not None  # the toy grader always answers: graded or not gradable, never an error
        assert written["not_gradable"] == report["not_gradable"]
        assert [(t["name"], t["status"], t["points"]) for t in written["tests"]] == \
            [(t["name"], t["status"], t["points"]) for t in report["tests"]] == rows[name]
        junit = ET.parse(folder / "junit.xml").getroot()
        counts = {kind: sum(JUNIT.get(status) == kind for _, status, _ in rows[name])
                  for kind in ("failures", "errors", "skipped")}
        assert {kind: int(junit.get(kind)) for kind in ("tests", *counts)} == {"tests": len(rows[name]), **counts}
        passes = [case.get("name") for case in junit.iter("testcase")
                  if not any(child.tag in ("failure", "error", "skipped") for child in case)]
        assert sorted(passes) == sorted(test for test, status, _ in rows[name] if status not in JUNIT)  # by assignment


def check(out: Path) -> None:
    check_reports(out)
    rows, parts, late = stored(out)
    grades = {row["name"]: row for row in csv.DictReader((out / "grades.csv").open())}
    index = (out / "report" / "index.html").read_text()
    assert sorted(grades) == sorted(rows)
    for name, (status, message) in rows.items():
        feedback = (out / "submissions" / name / "feedback.md").read_text()
        results = json.loads((out / "submissions" / name / "results.json").read_text())
        row = grades[name]
        assert row["status"] == status
        if status == "not_gradable":
            check_not_gradable(name, message, feedback, results, row, index)
            continue
        mine = parts[name]
        penalised = {a: round(p[0] * (1 - late[name][a][0]), 2) for a, p in mine.items() if a in late.get(name, {})}
        total = [sum(p[i] for p in mine.values()) for i in range(4)]
        assert f"Score: **{points(total[0])} / {points(total[1])}** points graded here" in feedback
        assert results["extra_data"]["points"] == {"score": round(total[0], 2), "graded": round(total[1], 2),
                                                   "by_hand": round(total[2], 2), "gpu": round(total[3], 2),
                                                   "total": round(sum(total[1:]), 2)}
        assert results["score"] == round(round(total[0], 2) - sum(round(mine[a][0], 2) - v for a, v in penalised.items()), 2)
        for assignment, (got, graded, by_hand, gpu) in mine.items():
            assert [row[assignment], row[f"{assignment} max graded here"], row[f"{assignment} max awaiting hand grading"],
                    row[f"{assignment} max needing a GPU"], row[f"{assignment} max"]] == \
                [str(round(v, 2)) for v in (got, graded, by_hand, gpu, graded + by_hand + gpu)]
            if "total penalised" in row:
                assert float(row[f"{assignment} penalised"]) == penalised.get(assignment, round(got, 2))
        assert ("<!-- late policy -->" in feedback) == bool(penalised)
        for assignment, value in penalised.items():
            assert f"- {assignment}: " in feedback and f"**{points(value)} / {points(mine[assignment][1])}** points after" \
                in feedback
            assert row[f"{assignment} days late"] == str(late[name][assignment][1])
        if "total penalised" in row:  # the sum of the penalised scores shown
            assert float(row["total penalised"]) == round(sum(float(row[f"{a} penalised"]) for a in mine), 2)
        assert re.search(rf'data-submission="{name}">.*?data-field="total">{re.escape(points(total[0]))} / '
                         rf'{re.escape(points(total[1]))}<', index, re.S)
    for cell in (c for row in grades.values() for c in row.values()):
        assert not re.fullmatch(r"-?\d+\.\d{3,}", cell), cell  # no float noise anywhere


def check_not_gradable(name: str, reason: str, feedback: str, results: dict, row: dict, index: str) -> None:
    assert feedback.splitlines()[2].startswith("**Not gradable**") and "corrupt zip" in feedback.splitlines()[2]
    assert "Score" not in feedback and "score" not in results and results["tests"] == []
    assert results["output"].startswith("Not gradable: ") and "corrupt zip" in reason
    assert row["total"] == "" and row["max"] == "" and "corrupt zip" in row["reason"]
    assert 'id="not-gradable-table"' in index and "Every submission was graded" not in index
