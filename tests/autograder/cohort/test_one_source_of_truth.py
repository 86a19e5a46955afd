"""One number everywhere: a cohort driven through random sequences of a term's steps, after each of which every
file says the grade the gradebook holds, and the gradebook's history accounts for it.

The steps: a batch, a regrade, a resubmission (or a first submission, or one that cannot be graded), hand
grading (`manual export`, a sheet filled in, `manual import`), an override, an excusal, an extension (in the
course file, then `report`), submission times (`batch --times`), the answers' release (the course file's date,
then `report`) and the LMS exports (`export`). After each step, for every student, the same points and the same
maximum in feedback.md, results.json, junit.xml, report.json, grades.csv, the cohort report's tables, and
canvas.csv and lms.csv once exported; and the history's last word on each grade, hand score, override,
extension, submission time and penalty is what the gradebook holds now. The expected numbers are read from the
gradebook with sqlite3, apart from the code under test, and the final scores computed here from the raw ones,
the stored penalties and the course file's overrides.

The grader is test_term's stand-in (toy tests, the written answers of resource_accounting graded for real), so
an example costs what the files cost, not a grading: a regrade gives the same report, as the grader would for
the same submission. The charts of the cohort report are not drawn (their numbers are the tables'; test_term
checks their maximum). The examples are the same on every run (derandomize), one of them fixed to go through
every kind of step.
"""

from __future__ import annotations

import contextlib
import csv
import json
import re
import sqlite3
import tempfile
import xml.etree.ElementTree as ET
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import autograder.report.site as site
from autograder.cli import main
from autograder.cohort.batch import run_batch
from autograder.cohort.course import load_late
from autograder.cohort.late import ANY
from autograder.model.results import GradeReport
from autograder.report.text import points
from tests.autograder.cohort.test_term import FA, MODEL, QUESTIONS, RA, term_grade
from tests.autograder.report.test_gradebook import quiet

NAMES = ("ann", "ben", "cat", "dan")
ROSTER = "id,name,email,section,login\n" + "".join(f"s{i},{n.title()} Doe,{n}@uni.edu,{'AB'[i % 2]},{n}\n"
                                                     for i, n in enumerate(NAMES, start=1))
STUDENT = {name: f"s{i}" for i, name in enumerate(NAMES, start=1)}
TESTS = ((RA, "a"), (RA, "b"), (FA, "a"), (FA, "b"))
PARTIAL = MODEL.split("## Q9.1")[0]  # Q9.1 and Q10.1 left out
DUE = "2020-01-20T17:00:00-08:00"
RELEASE = "2020-01-27T17:00:00-08:00"  # in the past: the answers are out, and no submission after it counts


def grade(path: Path) -> GradeReport:
    if (path / "corrupt").exists():
        return GradeReport(path.name, log=["toy"], not_gradable=f"{path.name}.zip is a corrupt zip: zip it again")
    return term_grade(path)


def write(cohort: Path, name: str, content: tuple | None) -> None:
    """content: (the toy tests that fail, "model" | "partial" | "blank") or None for one not gradable."""
    folder = cohort / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corrupt").unlink(missing_ok=True)
    if content is None:
        (folder / "corrupt").write_text("")
        return
    fails, answers = content
    (folder / "tests.txt").write_text("".join(f"{a} {t} {'no' if (a, t) in fails else 'ok'}\n" for a, t in TESTS)
                                      + f"{RA} c gpu\n")
    (folder / RA).mkdir(exist_ok=True)
    text = {"model": MODEL, "partial": PARTIAL}.get(answers)
    if text is None:
        (folder / RA / "answers.md").unlink(missing_ok=True)
    else:
        (folder / RA / "answers.md").write_text(text)


def course_text(state: dict) -> str:
    text = f'[roster]\nfile = "roster.csv"\n'
    for name in (RA, FA):
        text += f'\n[assignments.{name}]\ndue = {DUE}\nrule = "capped"\nper_day = 0.1\ncap = 0.3\n'
    if state["release"]:
        text += f"\n[answers]\nrelease = {RELEASE}\n"
    for (student, assignment), value in sorted(state["overrides"].items()):
        setting = "excused = true" if value is None else f"score = {value}"
        text += f'\n[[overrides]]\nstudent = "{student}"\nassignment = "{assignment}"\n{setting}\nreason = "r"\n'
    for student, days in sorted(state["extensions"].items()):
        text += (f'\n[[extensions]]\nstudent = "{student}"\nassignment = "{RA}"\n'
                 f'due = 2020-01-{20 + days}T17:00:00-08:00\nreason = "a note"\n')
    return text


content = st.one_of(st.none(), st.tuples(st.frozensets(st.sampled_from(TESTS), max_size=3),
                                         st.sampled_from(("model", "partial", "blank"))))
names, students = st.sampled_from(NAMES), st.sampled_from(tuple(STUDENT.values()))
step = st.one_of(
    st.tuples(st.just("batch")),
    st.tuples(st.just("regrade"), names),
    st.tuples(st.just("resubmit"), names, content),
    st.tuples(st.just("hand"), st.sampled_from([q.id for q in QUESTIONS]), st.sampled_from((0.0, 0.5, 1.0))),
    st.tuples(st.just("override"), students, st.sampled_from((RA, FA)), st.sampled_from((0, 1.5, 7))),
    st.tuples(st.just("excuse"), students, st.sampled_from((RA, FA))),
    st.tuples(st.just("extension"), students, st.integers(1, 4)),
    st.tuples(st.just("times"), st.lists(st.integers(-1, 9), min_size=len(NAMES), max_size=len(NAMES))),
    st.tuples(st.just("release"), st.booleans()),
    st.tuples(st.just("export"), st.sampled_from(("canvas", "csv"))),
)
EVERY_STEP = [("times", [1, 0, 8, 3]), ("hand", "Q9.1", 0.5), ("override", "s2", FA, 1.5), ("excuse", "s3", RA),
              ("export", "canvas"), ("resubmit", "ann", (frozenset({(RA, "a")}), "partial")), ("export", "csv"),
              ("extension", "s1", 2), ("release", True), ("regrade", "ben"), ("resubmit", "dan", None), ("batch",)]


@pytest.fixture(scope="module")
def no_charts():
    """The cohort report without its histograms (matplotlib: most of a publish's time)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(site, "write_charts", lambda folder, assignments, totals: {
            "": "none.svg", **{row["name"]: "none.svg" for row in assignments}})
        yield


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@example(start=[(frozenset(), "model"), (frozenset({(FA, "a")}), "blank"), None, None], steps=EVERY_STEP)
@given(start=st.lists(st.one_of(content, st.just("absent")), min_size=len(NAMES), max_size=len(NAMES)),
       steps=st.lists(step, min_size=1, max_size=6))
def test_every_file_shows_the_gradebooks_grade_after_any_steps_of_a_term(no_charts, start, steps):
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        term, cohort = Path(tmp), Path(tmp) / "cohort"
        (term / "roster.csv").write_text(ROSTER)
        state = {"overrides": {}, "extensions": {}, "release": False, "times": {}, "exports": set()}
        (term / "grading.toml").write_text(course_text(state))
        cohort.mkdir()
        for name, first in zip(NAMES, start):
            if first != "absent":
                write(cohort, name, first)
        batch(term)
        check(term, state)
        for kind, *args in steps:
            take(term, state, kind, args)
            check(term, state)


def batch(term: Path, late: dict | None = None, regrade: tuple[str, ...] = ()) -> None:
    policy = (load_late(term / "grading.toml"), late) if late is not None else None
    run_batch(term / "cohort", term / "out", grade_fn=grade, console=quiet(), course=term / "grading.toml",
              late=policy, regrade=regrade)


def take(term: Path, state: dict, kind: str, args: list) -> None:
    """One step of the term, through the command an instructor runs (a batch through run_batch, which the
    batch verb calls with the grader this test replaces)."""
    if kind == "batch":
        batch(term)
    elif kind == "regrade":
        batch(term, regrade=tuple(n for n in args if (term / "cohort" / n).is_dir()))
    elif kind == "resubmit":
        write(term / "cohort", *args)
        batch(term)
    elif kind == "hand":
        hand_grade(term, *args)
    elif kind == "times":
        due = load_late(term / "grading.toml").assignments[RA].due
        state["times"] = {(name, ANY): due + timedelta(days=days, minutes=1) for name, days in zip(NAMES, args[0])}
        batch(term, late=state["times"])
    elif kind == "export":
        assert main(["export", "--format", args[0], "out", "--by", "prof"]) == 0
        state["exports"].add(args[0])
    else:
        if kind == "override":
            state["overrides"][(args[0], args[1])] = args[2]
        elif kind == "excuse":
            state["overrides"][(args[0], args[1])] = None
        elif kind == "extension":
            state["extensions"][args[0]] = args[1]
        else:
            state["release"] = args[0]
        (term / "grading.toml").write_text(course_text(state))
        assert main(["report", "out"]) == 0


def hand_grade(term: Path, question: str, share: float) -> None:
    """`manual export`, every criterion of one question's sheet given `share` of its points, `manual import`."""
    assert main(["manual", "export", "out"]) == 0
    sheet = term / "out" / "manual" / f"{RA}-{question}.csv"
    if not sheet.is_file():  # no answer of that question waits for a grader
        return
    table = list(csv.reader(sheet.open(encoding="utf-8")))
    columns = [i for i, name in enumerate(table[0]) if re.fullmatch(r"c\d+ \(max ([\d.]+)\).*", name)]
    for row in table[1:]:
        for i in columns:
            row[i] = points(share * float(re.match(r"c\d+ \(max ([\d.]+)\)", table[0][i]).group(1)))
    with sheet.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(table)
    assert main(["manual", "import", "out", str(sheet), "--by", "ta"]) == 0


# ---- what the gradebook holds, read with sqlite3 ----------------------------------------------------------

def gradebook(out: Path) -> dict:
    db = sqlite3.connect(out / "gradebook.sqlite")
    try:
        rows = {n: (s, m) for n, s, m in db.execute("SELECT name, status, message FROM submissions")}
        raw: dict[str, dict[str, list[float]]] = {}
        for name, assignment, status, got, most in db.execute(
                "SELECT submission, assignment, status, points, max_points FROM tests"):
            mine = raw.setdefault(name, {}).setdefault(assignment, [0.0, 0.0, 0.0])
            mine[0] += got
            mine[1] += 0.0 if status == "not_graded" else most  # the maximum: the GPU test's points not counted
            mine[2] += most if status == "manual" else 0.0
        for name, groups in db.execute("SELECT name, assignments FROM submissions WHERE status = 'missing'"):
            raw[name] = {a: [0.0, most, 0.0] for a, (_, most) in json.loads(groups).items()}
        late = {(s, a): (p, t, d) for s, a, p, t, d in db.execute(
            "SELECT submission, assignment, penalty, submitted_at, days_late FROM late")}
        row_of = {i: s or i for i, s in db.execute("SELECT id, submission FROM roster")}
        by_id = {(s, a, k): v for s, a, k, v in db.execute("SELECT student, assignment, kind, value FROM adjustments")}
        adjusted = {(row_of.get(s, s), a, k): v for (s, a, k), v in by_id.items()}
        manual = {(s, q): p for s, q, p in db.execute("SELECT submission, question, points FROM manual_scores")}
        history = [dict(zip(("by", "student", "submission", "assignment", "change", "before", "after"), r))
                   for r in db.execute("SELECT by, student, submission, assignment, change, before, after "
                                       "FROM history ORDER BY rowid")]
    finally:
        db.close()
    final = {}
    for name, groups in raw.items():
        for assignment, (got, _, _) in groups.items():
            value = adjusted.get((name, assignment, "override"))
            penalty = late.get((name, assignment), (0.0,))[0]
            final[(name, assignment)] = (None if value == "excused" else float(value) if value is not None
                                         else round(got * (1 - penalty), 2))
    return {"rows": rows, "raw": raw, "late": late, "final": final, "adjusted": adjusted, "by_id": by_id,
            "manual": manual, "history": history, "row_of": row_of}


def check(term: Path, state: dict) -> None:
    out, book = term / "out", gradebook(term / "out")
    grades = {row["submission"] or row["id"]: row for row in csv.DictReader((out / "grades.csv").open(encoding="utf-8"))}
    index = (out / "report" / "index.html").read_text(encoding="utf-8")
    assert sorted(grades) == sorted(book["rows"])
    for name, (status, message) in book["rows"].items():
        row = grades[name]
        assert row["status"] == status
        if status == "not_gradable":
            check_not_gradable(out, name, row, index)
            continue
        mine = book["raw"][name]
        finals = {a: book["final"][(name, a)] for a in mine}
        total = [sum(v[i] for v in mine.values()) for i in range(3)]
        final_total = round(sum(v for v in finals.values() if v is not None), 2)
        final_max = sum(mine[a][1] for a, v in finals.items() if v is not None)
        for assignment, (got, most, by_hand) in mine.items():  # grades.csv
            assert [row[assignment], row[f"{assignment} max"], row[f"{assignment} max awaiting hand grading"]] == \
                [str(round(got, 2)), str(round(most, 2)), str(round(by_hand, 2))]
            assert row[f"{assignment} final"] == ("excused" if finals[assignment] is None else str(finals[assignment]))
        assert (float(row["total final"]), float(row["total final max"])) == (final_total, round(final_max, 2))
        assert re.search(rf'<tr data-submission="{name}">.*?data-field="total"[^>]*>{re.escape(points(final_total))} '
                         rf'/ {re.escape(points(final_max))}<', index, re.S), name  # the cohort report
        if status == "missing":
            continue
        folder = out / "submissions" / name
        feedback = (folder / "feedback.md").read_text(encoding="utf-8")
        assert f"Score: **{points(total[0])} / {points(total[1])}** points" in feedback
        for assignment, value in finals.items():
            if value is None:
                assert f"- {assignment}: excused" in feedback
            elif (name, assignment, "override") in book["adjusted"]:
                assert f"- {assignment}: **{points(value)} / {points(mine[assignment][1])}** points, set by" in feedback
            elif (name, assignment) in book["late"]:
                assert f"**{points(value)} / {points(mine[assignment][1])}** points after the late policy" in feedback
        results = json.loads((folder / "results.json").read_text())
        assert results["score"] == final_total and results["extra_data"]["points"]["maximum"] == round(total[1], 2)
        assert results["output"].splitlines()[0].startswith(("Score:", "Late policy", "Set by"))
        junit = ET.parse(folder / "junit.xml").getroot()
        for suite in junit.iter("testsuite"):
            props = {p.get("name"): p.get("value") for p in suite.find("properties")}
            got, most, _ = mine[suite.get("name")]
            assert (props["points"], props["max_points"]) == (points(got), points(most))
        stored = json.loads((folder / "report.json").read_text())
        assert round(sum(t["points"] for t in stored["tests"]), 2) == round(total[0], 2)
    check_exports(out, state, book, grades)
    check_history(book)
    for cell in (c for row in grades.values() for c in row.values()):
        assert not re.fullmatch(r"-?\d+\.\d{3,}", cell), cell  # no float noise anywhere


def check_not_gradable(out: Path, name: str, row: dict, index: str) -> None:
    feedback = (out / "submissions" / name / "feedback.md").read_text()
    assert feedback.splitlines()[2].startswith("**Not gradable**") and "Score" not in feedback
    assert not (out / "submissions" / name / "results.json").exists()  # Gradescope: a failed run, never a 0
    assert row["total"] == "" and row["total final"] == "" and "corrupt zip" in row["reason"]
    assert {row.get(f"{a} final", "") for a in (RA, FA)} <= {"", "excused"}  # no score; an excusal stands
    assert re.search(rf'<tr data-submission="{name}">.*?data-field="total">-<', index, re.S)


def check_exports(out: Path, state: dict, book: dict, grades: dict) -> None:
    """canvas.csv and lms.csv, once exported, say what grades.csv says after every later step."""
    if "canvas" in state["exports"]:
        header, possible, *students = list(csv.reader((out / "canvas.csv").open(encoding="utf-8")))
        maxima = {a: max(v[a][1] for v in book["raw"].values() if a in v) for a in header[5:]}
        assert possible[5:] == [points(maxima[a]) for a in header[5:]]
        for student in students:
            row = grades[book["row_of"][student[2]]]
            expected = ["EX" if row[f"{a} final"] == "excused" else "" if row["status"] == "not_gradable"
                        else points(float(row[f"{a} final"])) for a in header[5:]]
            assert student[5:] == expected, student
    if "csv" in state["exports"]:
        for lms in csv.DictReader((out / "lms.csv").open(encoding="utf-8")):
            row = grades[lms["submission"] or lms["id"]]
            for assignment in (RA, FA):
                if row["status"] != "not_gradable" and f"{assignment} max" in lms:  # an assignment some row has
                    assert [lms[f"{assignment} {k}"] for k in ("max", "raw", "final")] == \
                        [row[f"{assignment} max"], row[assignment], row[f"{assignment} final"]]
            assert lms["total final"] == row["total final"]


def check_history(book: dict) -> None:
    """The history's last row about each grade, hand score, adjustment, time and penalty is the gradebook's."""
    def last(match) -> dict | None:
        found = [h for h in book["history"] if match(h)]
        return found[-1] if found else None

    for name, (status, _) in book["rows"].items():
        if status == "graded":
            for assignment, (got, most, _) in book["raw"][name].items():
                entry = last(lambda h: h["change"] == "graded" and h["submission"] == name
                             and h["assignment"] == assignment)
                assert entry and entry["after"] == f"{points(got)} / {points(most)}", (name, assignment, entry)
        elif status == "not_gradable":
            entry = last(lambda h: h["change"] == "graded" and h["submission"] == name)
            assert entry and entry["after"] == "not gradable", (name, entry)
    for (name, question), got in book["manual"].items():
        entry = last(lambda h: h["change"] == f"hand score {question}" and h["submission"] == name)
        assert entry and entry["after"].startswith(f"{points(got)} / ") and entry["by"] == "ta", (name, question)
    for (student, assignment, kind), value in book["by_id"].items():
        entry = last(lambda h: h["change"].split(" removed")[0] in ("override", "excused", "extension")
                     and h["assignment"] == assignment and h["student"] == student
                     and h["change"].startswith("extension") == (kind == "extension"))
        assert entry and not entry["change"].endswith("removed"), (student, assignment, kind)
        assert entry["after"].startswith(f"due {value}") if kind == "extension" else entry["after"] == value
    for (name, assignment), (penalty, submitted, _) in book["late"].items():
        entry = last(lambda h: h["change"] == "submission time" and h["submission"] == name
                     and h["assignment"] == assignment)
        if submitted is None:
            assert entry is None or entry["after"] == "none: treated as on time", (name, assignment)
        else:
            assert entry and entry["after"] == submitted, (name, assignment)
        entry = last(lambda h: h["change"] == "late penalty" and h["submission"] == name
                     and h["assignment"] == assignment)
        assert (entry["after"] if entry else "0% off") == f"{penalty:.0%} off", (name, assignment)
