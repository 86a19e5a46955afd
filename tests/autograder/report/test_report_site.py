"""The cohort report (autograder.report.site): what it shows equals the gradebook, student text stays text,
its tables sort when a header is clicked and scroll when wide, its "needs help" view finds who struggles,
and it holds up with an empty cohort, grader errors and statuses it does not know.

The browser tests open the site in Debian's headless chromium (one browser for the module) and read what
a reader sees; the gradebook is queried here with sqlite3, independently of the report's code.
"""

import json
import re
import sqlite3
import statistics
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from autograder.cohort.batch import run_batch
from autograder.cli import main as cli_main
from autograder.report.gradebook import Gradebook
from autograder.report.site import HELP_ROWS, write_site
from autograder.report.site_bench import synthetic_cohort
from autograder.model.results import GradeReport, TestResult

ROOT = Path(__file__).resolve().parents[3]
HOSTILE_NAME = "<script>alert('name')</script>"
HOSTILE_MESSAGE = "AssertionError: <img src=x onerror=alert(1)> </code></pre><script>alert('message')</script>"
UNKNOWN_STATUS = "graded_by_hand"
IMG_NAME = "<img src=x onerror=alert(1)>"
STATIC_HIT = ("Failed: static check: flops.py line 3: `torch.utils.flop_counter` is forbidden in flops.py "
              "(count the FLOPs yourself)")
TIME_OUT = ("autograder.sandbox.process.WorkerError: the call timed out after 15 s of CPU time (an endless loop, "
            "far too slow, or not reading its requests)")
DUE = datetime(2027, 1, 20, 17, 0, tzinfo=timezone.utc)


class Elements(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def elements(path: Path) -> list[tuple[str, dict]]:
    parser = Elements()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.tags


def hostile_report(name: str) -> GradeReport:
    return GradeReport(name, [
        TestResult("tests/alpha/test_a.py::test_one", "alpha", 2.0, "passed", task="a.one"),
        TestResult("tests/alpha/test_a.py::test_two", "alpha", 1.0, "failed", message=HOSTILE_MESSAGE, task="a.two"),
    ], log=["grading notes <b>bold</b>"])


def add_unknown_status(out: Path, submission: str, name: str = "written/W1") -> None:
    """A result with a status this version does not know, as a newer grader could store it."""
    db = sqlite3.connect(out / "gradebook.sqlite")
    with db:
        position = db.execute("SELECT COUNT(*) FROM tests WHERE submission = ?", (submission,)).fetchone()[0]
        db.execute("INSERT INTO tests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (submission, position, name, "resource_accounting", UNKNOWN_STATUS, 1.5, 2.0, "visible",
                    "graded by hand: half the rubric"))
    db.close()


def struggling_report(name: str) -> GradeReport:
    """Stubs left in three tasks, two calls over their CPU budget, a static check's hit, a test that could
    not run, and one test passed."""
    tests = [TestResult(f"tests/alpha/test_b.py::test_stub[{i}]", "alpha", 1.0, "not_implemented",
                        message="NotImplementedError: b.task", task=f"b.task{i}") for i in range(3)]
    tests += [TestResult(f"tests/alpha/test_b.py::test_slow[{i}]", "alpha", 1.0, "failed", message=TIME_OUT,
                         task="b.slow") for i in range(2)]
    tests += [TestResult("tests/alpha/test_b.py::test_counter", "alpha", 2.0, "failed", message=STATIC_HIT,
                         task="b.counter"),
              TestResult("tests/alpha/test_b.py::test_setup", "alpha", 1.0, "error", message="fixture failed",
                         task="b.setup"),
              TestResult("tests/alpha/test_a.py::test_one", "alpha", 2.0, "passed", task="a.one")]
    return GradeReport(name, tests)


def add_late(out: Path, rows: list[tuple[str, str, int, float]]) -> None:
    """The late policy's rows (submission, assignment, days late, penalty) as a batch stores them; the
    scores in them are the ones as of then, which a view does not read."""
    db = sqlite3.connect(out / "gradebook.sqlite")
    with db:
        db.executemany("INSERT INTO late (submission, assignment, submitted_at, due, days_late, late_days_used, "
                       "penalty, score, max_score, penalised, note) VALUES (?, ?, ?, ?, ?, 0, ?, 0, 0, 0, ?)",
                       [(name, assignment, DUE.isoformat(), DUE.isoformat(), days, penalty,
                         f"{days} days late: {penalty:.0%} off") for name, assignment, days, penalty in rows])
    db.close()


def add_sections(out: Path, sections: dict[str, str]) -> None:
    """A roster of some submissions' students with their sections, as the gradebook keeps it."""
    db = sqlite3.connect(out / "gradebook.sqlite")
    with db:
        db.executemany("INSERT INTO roster (position, id, name, email, section, login, submission) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [(i, f"id{i}", f"student {i}", f"s{i}@example.edu", section, f"s{i}", name)
                        for i, (name, section) in enumerate(sections.items())])
    db.close()


def cohort(out: Path) -> Path:
    """A synthetic cohort with one grader error, two hostile submissions (one struggling), one unknown
    status, late penalties for three submissions and a roster's sections for most of them."""
    names = synthetic_cohort(out, 10, seed=3, errors=1)
    with Gradebook(out / "gradebook.sqlite") as book:
        book.record(HOSTILE_NAME, "hostile", hostile_report(HOSTILE_NAME))
        book.record(IMG_NAME, "struggling", struggling_report(IMG_NAME))
    add_late(out, [(names[1], "resource_accounting", 2, 0.2), (names[2], "flash_attention", 5, 0.5),
                   (IMG_NAME, "alpha", 1, 0.1)])
    add_unknown_status(out, names[-1])
    add_sections(out, {name: "B" if i % 3 else "A" for i, name in enumerate(names[:8])} | {IMG_NAME: "A"})
    return write_site(out)


# --- without a browser ---------------------------------------------------------------------------------

def test_student_text_is_shown_as_text_everywhere(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record(HOSTILE_NAME, "d", hostile_report(HOSTILE_NAME))
    index = write_site(tmp_path)
    pages = [index, *sorted((index.parent / "submissions").glob("*.html"))]
    assert len(pages) == 2 and re.fullmatch(r"0000-[A-Za-z0-9_-]+\.html", pages[1].name)
    for page in pages:
        tags = elements(page)
        # the one script is the sorting file beside the index, by origin; no page has inline script
        assert [attrs for tag, attrs in tags if tag == "script"] == (
            [{"src": "site.js", "defer": None}] if page == index else []), page
        assert "<script></script>" not in page.read_text() and re.search(r"<script[^>]*>[^<]", page.read_text()) is None
        assert [attrs["src"] for tag, attrs in tags if tag == "img"] == (
            ["charts/scores-total.svg", "charts/scores-0-alpha.svg"] if page == index else []), page
        assert not [a for _, attrs in tags for a in attrs if a.startswith("on")], page
        text = page.read_text()
        assert "&lt;script&gt;alert(" in text
    submission = pages[1].read_text()
    # the message in the tests table and in the rendered feedback, both escaped; the name in the title
    assert submission.count("&lt;img src=x onerror=alert(1)&gt;") >= 2
    assert "<title>&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt;: 2 / 3</title>" in submission
    assert "grading notes &lt;b&gt;bold&lt;/b&gt;" in submission


def test_a_name_that_climbs_out_of_the_folder_gets_a_page_inside_it(tmp_path):
    out = tmp_path / "out"
    with Gradebook(out / "gradebook.sqlite") as book:
        book.record("../../outside", "d", hostile_report("../../outside"))
    index = write_site(out)
    pages = list((index.parent / "submissions").iterdir())
    assert [p.name for p in pages] == ["0000-_outside.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert '<a class="submission-link" href="submissions/0000-_outside.html">../../outside</a>' in index.read_text()


def test_an_empty_cohort_gives_a_page_that_says_so(tmp_path):
    Gradebook(tmp_path / "gradebook.sqlite").close()
    index = write_site(tmp_path)
    text = index.read_text()
    assert 'id="empty-cohort"' in text and 'id="count-submissions">0<' in text
    assert not list((index.parent / "submissions").iterdir())
    assert not list((index.parent / "charts").glob("*.svg"))


def test_grader_errors_are_listed_with_their_message_and_page(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record("ok", "1", hostile_report("ok"))
        book.record_error("broken", "2", "Traceback ...\nRuntimeError: the grading server died")
    index = write_site(tmp_path)
    text = index.read_text()
    assert 'id="count-errors">1<' in text and 'id="count-graded">1<' in text
    rows = [attrs for tag, attrs in elements(index) if tag == "tr" and attrs.get("data-submission") == "broken"]
    assert len(rows) == 3  # in the errors table, the needs-help view (a grader error) and the submissions table
    assert "RuntimeError: the grading server died" in text
    page = next((index.parent / "submissions").glob("*-broken.html")).read_text()
    assert "<title>broken: not graded</title>" in page and 'id="error-message"' in page


def test_a_status_it_does_not_know_is_shown_as_itself(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record("ann", "1", hostile_report("ann"))
    add_unknown_status(tmp_path, "ann")
    add_unknown_status(tmp_path, "ann", name="tests/alpha/test_a.py::test_three")
    index = write_site(tmp_path)
    text = index.read_text()
    # a column of the tests table, for the test of the code; the written answer is not in that table
    assert f'<th class="num" data-sort="number">{UNKNOWN_STATUS}</th>' in text
    assert 'data-test="tests/alpha/test_a.py::test_three"' in text and 'data-test="written/W1"' not in text
    assert f'<span class="status-other">2 {UNKNOWN_STATUS}</span>' in text  # the submission's row
    page = next((index.parent / "submissions").glob("*-ann.html")).read_text()
    assert f'<td class="status-other">{UNKNOWN_STATUS}</td>' in page and "graded by hand: half the rubric" in page


def test_the_index_links_the_similarity_page_only_where_it_exists(tmp_path):
    Gradebook(tmp_path / "gradebook.sqlite").close()
    assert "similarity.html" not in write_site(tmp_path).read_text()
    (tmp_path / "report" / "similarity.html").write_text("<title>similarity</title>")
    index = write_site(tmp_path)
    assert '<a id="similarity-link" href="similarity.html">' in index.read_text()
    assert (tmp_path / "report" / "similarity.html").read_text() == "<title>similarity</title>"


def test_the_command_writes_the_report_or_says_what_is_missing(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["report", str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2
    assert "no gradebook at" in capsys.readouterr().err
    Gradebook(tmp_path / "gradebook.sqlite").close()
    assert cli_main(["report", str(tmp_path)]) == 0
    assert str(tmp_path / "report" / "index.html") in capsys.readouterr().out


def test_batch_writes_the_report_at_its_end(tmp_path):
    for name in ("a", "b"):
        (tmp_path / "in" / name).mkdir(parents=True)
    run_batch(tmp_path / "in", tmp_path / "out", grade_fn=lambda path: hostile_report(path.name))
    text = (tmp_path / "out" / "report" / "index.html").read_text()
    assert 'id="count-graded">2<' in text and text.count('class="submission-link"') == 2


# --- in a browser --------------------------------------------------------------------------------------

def query(out: Path, sql: str, *args) -> list[tuple]:
    db = sqlite3.connect(f"{(out / 'gradebook.sqlite').resolve().as_uri()}?mode=ro", uri=True)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def shown(value: float) -> str:
    """How a figure is written: rounded to two decimals, a whole number bare, no trailing zero."""
    value = round(value, 2)
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}".rstrip("0")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from autograder.report.site_browser import browser, missing

    reason = missing()
    if reason:
        pytest.skip(f"no headless browser: {reason}")
    out = tmp_path_factory.mktemp("cohort")
    index = cohort(out)
    with browser() as driver:
        open_page(driver, index.as_uri())
        yield out, index, driver


def open_page(driver, uri: str, selector: str = "a.submission-link", deadline_s: float = 60.0) -> None:
    """Load `uri` afresh (by way of a blank page, so that loading the page shown now is a new document)
    and wait, up to a deadline, until it has finished loading and holds `selector`: on a busy machine
    the driver can hand back the page before its body is there."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    driver.get(uri)
    WebDriverWait(driver, deadline_s).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
        and d.find_elements("css selector", selector),
        f"{uri} did not show {selector} within {deadline_s:.0f} s")


def console_errors(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]


def test_the_index_loads_without_console_errors_and_is_saved_as_a_screenshot(site):
    out, index, driver = site
    open_page(driver, index.as_uri())
    assert driver.title == "Cohort report: 12 submissions"
    assert console_errors(driver) == []
    images = driver.find_elements("css selector", "figure img")
    assignments = query(out, "SELECT DISTINCT assignment FROM tests")
    assert len(images) == len(assignments) + 1  # one per assignment, and the totals
    assert all(driver.execute_script("return arguments[0].naturalWidth", image) > 0 for image in images)
    png = ROOT / "build" / "report" / "index.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(png)) and png.stat().st_size > 10_000


def test_the_counts_and_score_figures_equal_the_gradebooks(site):
    out, index, driver = site
    open_page(driver, index.as_uri())
    (total,), = query(out, "SELECT COUNT(*) FROM submissions")
    (errors,), = query(out, "SELECT COUNT(*) FROM submissions WHERE status = 'error'")
    by_id = {i: driver.find_element("id", i).text for i in ("count-submissions", "count-graded", "count-errors")}
    assert by_id == {"count-submissions": str(total), "count-graded": str(total - errors),
                     "count-errors": str(errors)}
    scores: dict[str, list[tuple[float, float]]] = {}
    for (_, assignment), pair in assignment_finals(out).items():
        scores.setdefault(assignment, []).append(pair)
    rows = driver.find_elements("css selector", "#assignment-table tbody tr")
    assert sorted(row.get_attribute("data-assignment") for row in rows) == sorted(scores)
    for row in rows:
        pairs = scores[row.get_attribute("data-assignment")]
        cells = {c.get_attribute("data-field"): c.text for c in row.find_elements("css selector", "td[data-field]")}
        got = [p[0] for p in pairs]
        gpu, = query(out, "SELECT MAX(s) FROM (SELECT SUM(max_points) s FROM tests WHERE assignment = ? "
                     "AND status = 'not_graded' GROUP BY submission)", row.get_attribute("data-assignment"))
        by_hand, = query(out, "SELECT MAX(s) FROM (SELECT SUM(max_points) s FROM tests WHERE assignment = ? "
                         "AND status = 'manual' GROUP BY submission)", row.get_attribute("data-assignment"))
        assert cells == {"max_score": shown(max(p[1] for p in pairs)), "n": str(len(pairs)),
                         "by_hand": shown(by_hand[0] or 0),
                         "mean": shown(statistics.fmean(got)), "median": shown(statistics.median(got)),
                         "min": shown(min(got)), "max": shown(max(got)), "gpu_points": shown(gpu[0] or 0)}


def test_each_tests_pass_rate_equals_the_gradebooks_hardest_first(site):
    out, index, driver = site
    open_page(driver, index.as_uri())
    function = "CASE WHEN instr(name, '[') > 0 THEN substr(name, 1, instr(name, '[') - 1) ELSE name END"
    # written answers are left out, and so are the runs that could not run from the pass rate
    expected = {(assignment, name): rest for assignment, name, *rest in query(
        out, f"SELECT assignment, {function} f, COUNT(*), SUM(status = 'passed'), "
             "SUM(status IN ('passed', 'failed', 'not_implemented')), SUM(points), SUM(max_points) "
             "FROM tests WHERE name NOT LIKE 'written/%' AND status NOT IN ('manual', 'hand_graded') "
             "GROUP BY assignment, f")}
    # each row's keys and the text of its cells, as the browser renders them, in one call
    rows = driver.execute_script("""return Array.from(document.querySelectorAll('#test-table tbody tr'), row =>
        [row.dataset.assignment, row.dataset.test,
         Object.fromEntries(Array.from(row.querySelectorAll('td[data-field]'),
                                       c => [c.dataset.field, c.innerText]))]);""")
    assert len(rows) == len(expected)
    order = []
    for assignment, name, cells in rows:
        runs, passed, counted, got, total = expected[(assignment, name)]
        assert (cells["runs"], cells["passed"]) == (str(runs), str(passed))
        rate = passed / counted if counted else None
        assert cells["pass_rate"].strip() == ("-" if rate is None else f"{100 * rate:.1f}%")
        assert cells["share"] == f"{100 * got / total:.1f}%"
        order.append((rate is None, rate or 0.0, got / total))
    assert order == sorted(order)
    assert ("resource_accounting", "written/W1") not in {(a, n) for a, n, _ in rows}
    setup = next(cells for _, name, cells in rows if name.endswith("test_setup"))
    assert setup["pass_rate"].strip() == "-" and setup["runs"] == "1"  # it could not run: no pass rate
    static = driver.execute_script("""return Array.from(document.querySelectorAll('#test-table tbody tr'),
        row => [row.dataset.test, row.querySelector('td[data-status="static_check"]').innerText,
                row.querySelector('td[data-status="failed"]').innerText,
                row.querySelector('td.messages').innerText]);""")
    counter = next(row for row in static if row[0].endswith("test_counter"))
    assert counter[1:3] == ["1", "0"] and "static check" not in counter[3]  # a static hit, apart from failures
    header = [th.text for th in driver.find_elements("css selector", "#test-table thead th")]
    assert UNKNOWN_STATUS not in header and "static check" in header


def test_every_submission_link_opens_its_page_with_its_score(site):
    out, index, driver = site
    open_page(driver, index.as_uri())
    links = [(a.get_attribute("href"), a.text) for a in driver.find_elements("css selector", "a.submission-link")]
    stored = {name: (status, score, maximum) for name, status, score, maximum in
              query(out, "SELECT name, status, score, max_score FROM submissions")}
    assert sorted(text for _, text in links) == sorted(stored)
    assert HOSTILE_NAME in stored  # shown as text, not run: an alert would stop the driver
    for href, name in links:
        open_page(driver, href, "#submission-name")
        status, score, maximum = stored[name]
        assert driver.find_element("id", "submission-name").text == name
        if status == "graded":
            final, most = finals(out)[name]
            assert driver.title == f"{name}: {shown(final)} / {shown(most)}"
            assert driver.find_element("id", "score").text == shown(rows_score(out, name))
            assert driver.find_element("id", "max-score").text == shown(most)
            (tests,), = query(out, "SELECT COUNT(*) FROM tests WHERE submission = ?", name)
            assert len(driver.find_elements("css selector", "table.tests tbody tr")) == tests
        else:
            assert driver.title == f"{name}: not graded"
        assert console_errors(driver) == [], name


def assignment_finals(out: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """{(submission, assignment): (final score, maximum)} of each graded submission, from its test rows and the
    late table (this cohort has no override): the raw score less its penalty, rounded as every file shows it,
    out of all the points but those of the tests not graded for want of a GPU (autograder.report.parts)."""
    late = {(name, assignment): penalty for name, assignment, penalty in
            query(out, "SELECT submission, assignment, penalty FROM late")}
    return {(name, assignment): (round(score * (1 - late.get((name, assignment), 0.0)), 2), maximum)
            for name, assignment, score, maximum in query(
                out, "SELECT s.name, t.assignment, SUM(t.points), SUM(CASE WHEN t.status = 'not_graded' THEN 0 "
                     "ELSE t.max_points END) FROM submissions s JOIN tests t ON t.submission = s.name "
                     "WHERE s.status = 'graded' GROUP BY s.name, t.assignment")}


def finals(out: Path) -> dict[str, tuple[float, float]]:
    """{name: (final total, its maximum)} of each graded submission."""
    found: dict[str, tuple[float, float]] = {}
    for (name, _), (final, maximum) in assignment_finals(out).items():
        got, most = found.get(name, (0.0, 0.0))
        found[name] = (got + final, most + maximum)
    return found


def rows_score(out: Path, name: str) -> float:
    """The points of one submission's test rows (the unknown status added by hand among them)."""
    (found,), = query(out, "SELECT SUM(points) FROM tests WHERE submission = ?", name)
    return found or 0.0


def table(driver, selector: str, keys: tuple[str, ...]) -> list[tuple]:
    """Each row of a table as its data-* keys, then {data-field: shown text} of its cells."""
    return [tuple(row) for row in driver.execute_script("""
        const [selector, keys] = arguments;
        return Array.from(document.querySelectorAll(selector + ' tbody tr'), row => [
            ...keys.map(k => row.dataset[k]),
            Object.fromEntries(Array.from(row.querySelectorAll('td[data-field]'),
                                          c => [c.dataset.field, c.innerText.trim()]))]);""", selector, list(keys))]


def test_each_tasks_points_and_each_total_equal_the_gradebooks(site):
    out, index, driver = site
    open_page(driver, index.as_uri())
    per_task: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for (stored,) in query(out, "SELECT report FROM submissions WHERE status = 'graded'"):
        sums: dict[tuple[str, str], list[float]] = {}
        for test in json.loads(stored)["tests"]:
            pair = sums.setdefault((test["assignment"], test["task"]), [0.0, 0.0])
            pair[0] += test["points"]
            pair[1] += test["max_points"]
        for key, pair in sums.items():
            per_task.setdefault(key, []).append(tuple(pair))
    # the hand-graded result is not in any stored report: its row is the test table's (task "written")
    (got, most), = query(out, "SELECT points, max_points FROM tests WHERE name = 'written/W1'")
    per_task[("resource_accounting", "written")] = [(got, most)]
    rows = table(driver, "#task-table", ("assignment", "task"))
    assert sorted((a, t) for a, t, _ in rows) == sorted(per_task)
    for assignment, task, cells in rows:
        pairs = per_task[(assignment, task)]
        assert cells["max_points"] == shown(max(p[1] for p in pairs))
        assert cells["mean"] == shown(statistics.fmean(p[0] for p in pairs))
        assert cells["full"] == f"{sum(p[0] == p[1] for p in pairs)} of {len(pairs)}"
    stored = {name: (status, score, maximum) for name, status, score, maximum in
              query(out, "SELECT name, status, score, max_score FROM submissions")}
    rows = table(driver, "#submission-table", ("submission",))
    assert sorted(name for name, _ in rows) == sorted(stored)
    for name, cells in rows:
        status, score, maximum = stored[name]
        assert cells["total"] == (f"{shown(finals(out)[name][0])} / {shown(finals(out)[name][1])}"
                                  if status == "graded" else "-")


def click(driver, selector: str, header: str) -> None:
    """Click the sort button of the column `header` of a table."""
    cells = driver.find_elements("css selector", f"{selector} thead th")
    cell, = [c for c in cells if c.text.strip(" \u25b2\u25bc") == header]
    button = cell.find_element("css selector", "button.sort")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)  # clear of the sticky bar
    button.click()


def test_clicking_a_header_sorts_the_submissions_by_score_name_and_section(site):
    out, index, driver = site
    open_page(driver, index.as_uri())
    scores = finals(out)
    sections = dict(query(out, "SELECT submission, section FROM roster"))
    names = sorted(name for (name,) in query(out, "SELECT name FROM submissions"))  # the gradebook's order
    assert [name for name, _ in table(driver, "#submission-table", ("submission",))] == names
    not_graded = [n for n in names if n not in scores]
    click(driver, "#submission-table", "final score / max")
    ascending = sorted(scores, key=lambda n: (round(scores[n][0], 6), names.index(n)))
    rows = table(driver, "#submission-table", ("submission",))
    assert [name for name, _ in rows] == ascending + not_graded  # those with no score last
    assert [cells["total"] for _, cells in rows][:2] == [f"{shown(scores[n][0])} / {shown(scores[n][1])}"
                                                         for n in ascending[:2]]
    click(driver, "#submission-table", "final score / max")
    descending = sorted(scores, key=lambda n: (-round(scores[n][0], 6), names.index(n)))
    assert [name for name, _ in table(driver, "#submission-table", ("submission",))] == descending + not_graded
    header = driver.find_element("css selector", "#submission-table thead th:nth-child(4)")  # after the section
    assert header.get_attribute("aria-sort") == "descending"
    click(driver, "#submission-table", "submission")
    assert [name for name, _ in table(driver, "#submission-table", ("submission",))] == sorted(names, key=str.casefold)
    click(driver, "#submission-table", "section")
    rows = table(driver, "#submission-table", ("submission",))
    shown_sections = [cells["section"] for _, cells in rows]
    assert shown_sections == [sections.get(name, "") for name, _ in rows]
    in_order = sorted(sections.values())
    assert shown_sections == in_order + [""] * (len(names) - len(in_order))  # A before B, none last
    assert console_errors(driver) == []


def test_the_needs_help_view_lists_the_lowest_the_most_stubs_and_the_most_time_outs(site):
    out, index, driver = site
    open_page(driver, index.as_uri())
    scores = finals(out)
    (error,), = query(out, "SELECT name FROM submissions WHERE status = 'error'")
    share = {n: score / graded for n, (score, graded) in scores.items()}
    stubs: dict[str, int] = {}
    for name, stored in query(out, "SELECT name, report FROM submissions WHERE status = 'graded'"):
        stubs[name] = len({(t["assignment"], t["task"]) for t in json.loads(stored)["tests"]
                           if t["status"] == "not_implemented"})
    timeouts = dict(query(out, "SELECT submission, SUM(status != 'passed' AND message LIKE '%timed out after%') "
                               "FROM tests GROUP BY submission"))
    def first(sign) -> list[str]:
        return [n for n in sorted(share, key=lambda n: (sign(n), share[n], n)) if sign(n) < 0][:HELP_ROWS]

    expected = {"#help-lowest": [error, *first(lambda n: share[n] - 1)],  # the grader error first: not graded
                "#help-not-implemented": first(lambda n: -stubs[n]), "#help-timeouts": first(lambda n: -timeouts[n])}
    assert len(expected["#help-lowest"]) == HELP_ROWS + 1 and HELP_ROWS < len(scores)  # cut, the lowest kept
    assert IMG_NAME in expected["#help-not-implemented"] and IMG_NAME in expected["#help-timeouts"]
    for selector, names in expected.items():
        rows = table(driver, selector, ("submission",))
        assert [name for name, _ in rows] == names, selector
        for name, cells in rows:
            if name == error:
                assert (cells["status"], cells["total"], cells["share"]) == ("error", "-", "-")
                continue
            assert cells["total"] == f"{shown(scores[name][0])} / {shown(scores[name][1])}"
            assert cells["share"] == f"{100 * share[name]:.1f}%"
            assert (cells["not_implemented"], cells["timeouts"]) == (str(stubs[name]), str(timeouts[name]))
    click(driver, "#help-timeouts", "time-outs")  # sortable like every table: fewest first now
    rows = table(driver, "#help-timeouts", ("submission",))
    assert [int(cells["timeouts"]) for _, cells in rows] == sorted(timeouts[n] for n in expected["#help-timeouts"])


def test_a_hostile_name_is_text_in_the_sortable_table_and_the_needs_help_view(site):
    out, index, driver = site
    open_page(driver, index.as_uri())
    for selector in ("#submission-table", "#help-lowest", "#help-not-implemented", "#help-timeouts"):
        click(driver, selector, "submission")  # moved by the script: still text
        links = driver.find_elements("css selector", f"{selector} tr[data-submission] td:first-child a")
        assert IMG_NAME in [a.text for a in links], selector
        assert driver.find_elements("css selector", f"{selector} img") == [], selector
    assert console_errors(driver) == []


def test_penalised_scores_are_shown_beside_the_raw_ones(site):
    out, index, driver = site
    open_page(driver, index.as_uri())
    raw: dict[str, dict[str, float]] = {}
    for name, assignment, score in query(out, "SELECT t.submission, t.assignment, SUM(t.points) FROM tests t JOIN "
                                              "submissions s ON s.name = t.submission WHERE s.status = 'graded' "
                                              "GROUP BY t.submission, t.assignment"):
        raw.setdefault(name, {})[assignment] = score
    late = {(name, assignment): penalty for name, assignment, penalty in
            query(out, "SELECT submission, assignment, penalty FROM late")}
    penalised = {name: {a: round(v * (1 - late.get((name, a), 0.0)), 2) for a, v in mine.items()}
                 for name, mine in raw.items()}
    rows = driver.execute_script("""return Array.from(document.querySelectorAll('#submission-table tbody tr'), row =>
        [row.dataset.submission, row.querySelector('td[data-field="total"]').innerText,
         Object.fromEntries(Array.from(row.querySelectorAll('td[data-penalised]'),
                                       c => [c.dataset.penalised, c.innerText]))]);""")
    assert len(rows) == len(query(out, "SELECT name FROM submissions"))
    for name, total, by_assignment in rows:
        if name not in raw:
            assert total == "-"
            continue
        assert total == f"{shown(sum(penalised[name].values()))} / {shown(finals(out)[name][1])}"
        assert by_assignment == {a: shown(penalised[name][a]) if a in penalised[name] else "-" for a in by_assignment}
    assert any(v < raw[n][a] for n, mine in penalised.items() for a, v in mine.items())  # a penalty shows


def test_wide_tables_scroll_inside_the_page(site):
    out, index, driver = site
    try:
        driver.set_window_size(700, 1000)
        open_page(driver, index.as_uri())
        html = "document.documentElement"
        wide, window = driver.execute_script(f"return [{html}.scrollWidth, {html}.clientWidth]")
        assert wide <= window  # the page itself never scrolls sideways
        boxes = driver.execute_script("""return Array.from(document.querySelectorAll('table'), table => {
            const box = table.parentElement;
            box.scrollLeft = box.scrollWidth;
            const last = table.querySelector('thead th:last-child').getBoundingClientRect();
            return [table.id, box.className, getComputedStyle(box).overflowX, box.scrollWidth > box.clientWidth,
                    box.scrollLeft, Math.round(last.right - box.getBoundingClientRect().right)];});""")
        assert boxes and all(box[1] == "wide" and box[2] == "auto" for box in boxes), boxes
        scrolled = {box[0]: box for box in boxes if box[3]}
        assert "submission-table" in scrolled and "test-table" in scrolled
        for table_id, *_, left, overhang in scrolled.values():
            assert left > 0 and overhang <= 1, table_id  # its last column can be scrolled into view
    finally:
        driver.set_window_size(1400, 1000)
