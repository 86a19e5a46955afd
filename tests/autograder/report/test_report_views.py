"""The cohort report's views that find who needs help (autograder.report.site), read from the written HTML
without a browser: the "needs help" lists, static-check hits apart from failures, the hardest-tests list
without written answers and runs that could not run, penalised scores beside raw ones, the roster's
sections, the one script the pages' policy allows, and a hostile name kept as text in each of them.
(test_report_site.py clicks the same tables in a browser.)
"""

import re
import sqlite3
from html.parser import HTMLParser
from pathlib import Path

from autograder.model.results import GradeReport, TestResult
from autograder.report.gradebook import Gradebook
from autograder.report.site import load, needs_help, write_site

IMG_NAME = "<img src=x onerror=alert(1)>"
STATIC_HIT = "Failed: static check: flops.py line 3: `torch.utils.flop_counter` is forbidden in flops.py (count it)"
TIME_OUT = "autograder.sandbox.process.WorkerError: the call timed out after 15 s of CPU time (an endless loop)"
AFTER_TIME_OUT = "autograder.sandbox.process.WorkerError: not run: a.f already timed out or killed the worker 2 times"


class Tables(HTMLParser):
    """Each table's body rows by the table's id: the row's attributes and its cells as (attributes, text)."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[tuple[dict, list[tuple[dict, str]]]]] = {}
        self.table = self.cell = None
        self.in_body = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.table = self.tables.setdefault(attrs.get("id", ""), [])
        elif tag == "tbody":
            self.in_body = True
        elif tag == "tr" and self.in_body:
            self.table.append((attrs, []))
        elif tag == "td" and self.in_body:
            self.cell = [attrs, ""]

    def handle_endtag(self, tag):
        if tag == "tbody":
            self.in_body = False
        elif tag == "td" and self.cell is not None:
            self.table[-1][1].append((self.cell[0], " ".join(self.cell[1].split())))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[1] += data


def tables(page: Path) -> dict[str, list[tuple[dict, list[tuple[dict, str]]]]]:
    parser = Tables()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.tables


def fields(row) -> dict[str, str]:
    """{data-field or data-status: text} of a row's cells."""
    return {attrs.get("data-field") or attrs.get("data-status"): text for attrs, text in row[1]
            if "data-field" in attrs or "data-status" in attrs}


def by_key(table, key: str) -> dict[str, dict[str, str]]:
    return {row[0][key]: fields(row) for row in table}


def result(name: str, status: str, message: str = "", task: str = "a.one", points: float = 1.0,
           assignment: str = "alpha") -> TestResult:
    return TestResult(f"tests/{assignment}/test_a.py::{name}", assignment, points, status, message=message, task=task)


def record(out: Path, reports: dict[str, list[TestResult]]) -> None:
    with Gradebook(out / "gradebook.sqlite") as book:
        for name, tests in reports.items():
            book.record(name, name, GradeReport(name, tests))


def test_needs_help_lists_everyone_going_wrong_then_the_most_stub_tasks_and_the_most_time_outs(tmp_path):
    stubbed = [result(f"test_stub[{i}]", "not_implemented", "NotImplementedError", task=f"a.t{i // 2}")
               for i in range(4)]  # four tests of two tasks
    record(tmp_path, {
        "full": [result("test_one", "passed"), result("test_two", "passed")],
        "half": [result("test_one", "passed"), result("test_two", "failed", TIME_OUT)],
        "stubs": [result("test_one", "passed"), *stubbed],
        "slow": [result("test_one", "passed", points=3.0), result("test_s0", "failed", TIME_OUT),
                 result("test_s1", "failed", TIME_OUT), result("test_after", "failed", AFTER_TIME_OUT)],
        "low": [result("test_one", "failed", "AssertionError"), result("test_two", "passed", points=9.0),
                result("test_three", "not_implemented", task="a.t9", points=40.0)],
    })
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record_error("broken", "x", "RuntimeError: the grading server died")
    submissions = load(tmp_path)
    help = {sign: [s.name for s in rows] for sign, rows in needs_help(submissions, rows=2).items()}
    # shares: full 1, half 1/2, stubs 1/5, slow 3/6, low 9/50; full marks never listed, the grader error always
    assert help["going_wrong"] == ["broken", "low", "stubs"]
    assert help["not_implemented"] == ["stubs", "low"]  # 2 tasks (of 4 tests), then 1
    assert help["timeouts"] == ["slow", "half"]  # 2 time-outs (the call not run after them is not one), then 1
    everyone = needs_help(submissions)
    assert [s.name for s in everyone["going_wrong"]] == ["broken", "low", "stubs", "half", "slow"]
    assert [s.name for s in everyone["timeouts"]] == ["slow", "half"]
    index = tables(write_site(tmp_path))
    assert list(by_key(index["help-lowest"], "data-submission")) == ["broken", "low", "stubs", "half", "slow"]
    assert by_key(index["help-not-implemented"], "data-submission")["stubs"]["not_implemented"] == "2"
    assert by_key(index["help-timeouts"], "data-submission")["slow"]["timeouts"] == "2"
    assert by_key(index["submission-table"], "data-submission")["stubs"]["not_implemented"] == "2"


def test_static_check_hits_are_flagged_apart_from_failures(tmp_path):
    record(tmp_path, {"ann": [result("test_counter", "failed", STATIC_HIT),
                              result("test_plain", "failed", "AssertionError: 3 != 4"), result("test_one", "passed")],
                      "bob": [result("test_counter", "failed", "AssertionError: 5 != 6"),
                              result("test_plain", "passed"), result("test_one", "passed")]})
    index = write_site(tmp_path)
    found = tables(index)
    tests = {row[0]["data-test"].rsplit("::", 1)[1]: row for row in found["test-table"]}
    counter = fields(tests["test_counter"])
    assert (counter["static_check"], counter["failed"], counter["pass_rate"]) == ("1", "1", "0.0%")
    messages = tests["test_counter"][1][-1][1]
    assert "AssertionError: 5 != 6" in messages and "forbidden" not in messages
    submissions = by_key(found["submission-table"], "data-submission")
    assert (submissions["ann"]["static_check"], submissions["ann"]["failed"]) == ("1", "1")
    assert (submissions["bob"]["static_check"], submissions["bob"]["failed"]) == ("0", "1")
    static, = found["static-table"]
    assert static[0]["data-submission"] == "ann" and fields(static)["static_tests"] == "1"
    assert static[1][-1][1] == "1× flops.py line 3: `torch.utils.flop_counter` is forbidden in flops.py (count it)"
    page = next((index.parent / "submissions").glob("*-ann.html")).read_text()
    assert '<td class="status-static_check">static check</td>' in page
    assert '<td class="status-failed">failed</td>' in page  # the ordinary failure
    Gradebook(tmp_path / "none" / "gradebook.sqlite").close()
    assert 'id="no-static-hits"' in write_site(tmp_path / "none").read_text()


def test_the_hardest_tests_leave_out_written_answers_and_runs_that_could_not_run(tmp_path):
    written = TestResult("written/W1", "alpha", 2.0, "manual", task="written")
    graded = TestResult("written/W2", "alpha", 2.0, "hand_graded", points=1.0, task="written")
    record(tmp_path, {"ann": [result("test_one", "passed"), result("test_two", "failed", "AssertionError"),
                              written, graded],
                      "bob": [result("test_one", "error", "fixture 'tmp' failed: the grader was overloaded"),
                              result("test_two", "error", "fixture failed"), written, graded]})
    found = tables(write_site(tmp_path))
    tests = {row[0]["data-test"].rsplit("/", 1)[-1]: fields(row) for row in found["test-table"]}
    assert sorted(tests) == ["test_a.py::test_one", "test_a.py::test_two"]  # no written answer
    one, two = tests["test_a.py::test_one"], tests["test_a.py::test_two"]
    assert (one["runs"], one["pass_rate"], one["error"]) == ("2", "100.0%", "1")  # the error is not a failure
    assert (two["runs"], two["pass_rate"], two["error"]) == ("2", "0.0%", "1")
    assert "overloaded" not in (tmp_path / "report" / "index.html").read_text().split('id="tasks"')[0]
    tasks = {row[0]["data-task"] for row in found["task-table"]}
    assert "written" in tasks  # the written answers' points are still in the tasks' table


def late_rows(out: Path, rows: list[tuple[str, str, int, float]]) -> None:
    db = sqlite3.connect(out / "gradebook.sqlite")
    with db:
        db.executemany("INSERT INTO late (submission, assignment, submitted_at, due, days_late, late_days_used, "
                       "penalty, score, max_score, penalised, note) VALUES (?, ?, NULL, '2027-01-20T17:00:00+00:00', "
                       "?, 0, ?, 0, 0, 0, 'late')", rows)
    db.close()


def test_penalised_scores_stand_beside_the_raw_ones_only_where_a_late_policy_applies(tmp_path):
    beta = {"points": 2.5, "assignment": "beta"}
    record(tmp_path, {"ann": [result("test_one", "passed", points=3.0), result("test_b", "passed", **beta)],
                      "bob": [result("test_one", "passed", points=3.0), result("test_b", "failed", **beta)]})
    text = write_site(tmp_path).read_text()
    assert "after late penalty" not in text and "data-penalised" not in text
    late_rows(tmp_path, [("ann", "alpha", 2, 0.25), ("ann", "beta", 1, 0.1)])
    index = write_site(tmp_path)
    rows = {row[0]["data-submission"]: row for row in tables(index)["submission-table"]}
    for name, alpha, beta, total in (("ann", "2.25", "2.25", "4.5"), ("bob", "3", "0", "3")):
        penalised = {attrs["data-penalised"]: text for attrs, text in rows[name][1] if "data-penalised" in attrs}
        assert penalised == {"alpha": alpha, "beta": beta}
        assert fields(rows[name])["total"] == f"{total} / 5.5"  # the final score: the penalised ones' sum
    assert fields(rows["ann"])["raw"] == "5.5 / 5.5"  # the raw score beside it


def test_sections_come_from_the_roster_and_only_then_get_a_column(tmp_path):
    record(tmp_path, {"ann": [result("test_one", "passed")], "bob": [result("test_one", "failed")]})
    assert 'data-field="section"' not in write_site(tmp_path).read_text()
    db = sqlite3.connect(tmp_path / "gradebook.sqlite")
    with db:
        db.execute("INSERT INTO roster (position, id, name, email, section, login, submission) "
                   "VALUES (0, 's1', 'Ann', 'ann@example.edu', 'Tue 2pm', 'ann', 'ann')")
    db.close()
    found = tables(write_site(tmp_path))
    assert {k: v["section"] for k, v in by_key(found["submission-table"], "data-submission").items()} == {
        "ann": "Tue 2pm", "bob": ""}
    assert by_key(found["help-lowest"], "data-submission")["bob"]["section"] == ""


def test_the_only_script_is_the_sorting_file_the_policy_allows_by_origin(tmp_path):
    record(tmp_path, {"ann": [result("test_one", "passed")]})
    index = write_site(tmp_path)
    text = index.read_text()
    policy, = re.findall(r'http-equiv="Content-Security-Policy" content="([^"]*)"', text)
    assert policy == "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'"
    assert re.findall(r"<script[^>]*>.*?</script>", text, re.S) == ['<script src="site.js" defer></script>']
    script = (index.parent / "site.js").read_text()
    assert "innerHTML" not in script and "eval" not in script and "http" not in script
    page = next((index.parent / "submissions").glob("*.html")).read_text()
    assert "script-src" not in page and "<script" not in page
    assert text.count('<table id="submission-table" class="sortable">') == 1


def test_a_hostile_name_is_text_in_the_sortable_table_and_the_needs_help_view(tmp_path):
    record(tmp_path, {IMG_NAME: [result("test_one", "failed", TIME_OUT), result("test_two", "not_implemented"),
                                 result("test_three", "failed", STATIC_HIT)]})
    text = write_site(tmp_path).read_text()
    found = tables(tmp_path / "report" / "index.html")
    for table in ("submission-table", "help-lowest", "help-not-implemented", "help-timeouts", "static-table"):
        (attrs, cells), = found[table]
        assert attrs["data-submission"] == IMG_NAME and cells[0][1] == IMG_NAME, table
    escaped = "&lt;img src=x onerror=alert(1)&gt;"
    assert text.count(f">{escaped}</a>") == 5  # a link in each of the five tables
    assert "<img src=x" not in text and "onerror=alert(1)>" not in text
