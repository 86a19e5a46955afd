"""The cohort report (autograder.report.site): what it shows equals the gradebook, student text stays text,
and it holds up with an empty cohort, grader errors and statuses it does not know.

The browser tests open the site in Debian's headless chromium (one browser for the module) and read what
a reader sees; the gradebook is queried here with sqlite3, independently of the report's code.
"""

import json
import re
import sqlite3
import statistics
from html.parser import HTMLParser
from pathlib import Path

import pytest

from autograder.cohort.batch import run_batch
from autograder.cli import main as cli_main
from autograder.report.gradebook import Gradebook
from autograder.report.site import write_site
from autograder.report.site_bench import synthetic_cohort
from autograder.grading.results import GradeReport, TestResult

ROOT = Path(__file__).resolve().parents[3]
HOSTILE_NAME = "<script>alert('name')</script>"
HOSTILE_MESSAGE = "AssertionError: <img src=x onerror=alert(1)> </code></pre><script>alert('message')</script>"
UNKNOWN_STATUS = "graded_by_hand"


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


def add_unknown_status(out: Path, name: str) -> None:
    """A result with a status this version does not know, as a newer grader could store it."""
    db = sqlite3.connect(out / "gradebook.sqlite")
    with db:
        position = db.execute("SELECT COUNT(*) FROM tests WHERE submission = ?", (name,)).fetchone()[0]
        db.execute("INSERT INTO tests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (name, position, "written/W1", "resource_accounting", UNKNOWN_STATUS, 1.5, 2.0, "visible",
                    "graded by hand: half the rubric"))
    db.close()


def cohort(out: Path) -> Path:
    """A synthetic cohort with one grader error, one hostile submission and one unknown status."""
    names = synthetic_cohort(out, 10, seed=3, errors=1)
    with Gradebook(out / "gradebook.sqlite") as book:
        book.record(HOSTILE_NAME, "hostile", hostile_report(HOSTILE_NAME))
    add_unknown_status(out, names[-1])
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
        assert "script" not in [tag for tag, _ in tags], page
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
    assert len(rows) == 2  # in the errors table and in the submissions table
    assert "RuntimeError: the grading server died" in text
    page = next((index.parent / "submissions").glob("*-broken.html")).read_text()
    assert "<title>broken: not graded</title>" in page and 'id="error-message"' in page


def test_a_status_it_does_not_know_is_shown_as_itself(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record("ann", "1", hostile_report("ann"))
    add_unknown_status(tmp_path, "ann")
    index = write_site(tmp_path)
    text = index.read_text()
    assert f"<th class=\"num\">{UNKNOWN_STATUS}</th>" in text  # a column of the tests table
    assert f'<span class="status-other">1 {UNKNOWN_STATUS}</span>' in text  # the submission's row
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
        driver.get(index.as_uri())
        yield out, index, driver


def console_errors(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]


def test_the_index_loads_without_console_errors_and_is_saved_as_a_screenshot(site):
    out, index, driver = site
    driver.get(index.as_uri())
    assert driver.title == "Cohort report: 11 submissions"
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
    driver.get(index.as_uri())
    (total,), = query(out, "SELECT COUNT(*) FROM submissions")
    (errors,), = query(out, "SELECT COUNT(*) FROM submissions WHERE status = 'error'")
    by_id = {i: driver.find_element("id", i).text for i in ("count-submissions", "count-graded", "count-errors")}
    assert by_id == {"count-submissions": str(total), "count-graded": str(total - errors),
                     "count-errors": str(errors)}
    scores: dict[str, list[tuple[float, float]]] = {}
    for (groups,) in query(out, "SELECT assignments FROM submissions WHERE status = 'graded'"):
        for assignment, pair in json.loads(groups).items():
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
        graded, = query(out, "SELECT MAX(s) FROM (SELECT SUM(max_points) s FROM tests WHERE assignment = ? "
                        "AND status NOT IN ('manual', 'not_graded') GROUP BY submission)",
                        row.get_attribute("data-assignment"))
        assert cells == {"max_score": shown(max(p[1] for p in pairs)), "n": str(len(pairs)),
                         "max_graded": shown(graded[0] or 0), "by_hand": shown(by_hand[0] or 0),
                         "mean": shown(statistics.fmean(got)), "median": shown(statistics.median(got)),
                         "min": shown(min(got)), "max": shown(max(got)), "gpu_points": shown(gpu[0] or 0)}


def test_each_tests_pass_rate_equals_the_gradebooks_hardest_first(site):
    out, index, driver = site
    driver.get(index.as_uri())
    function = "CASE WHEN instr(name, '[') > 0 THEN substr(name, 1, instr(name, '[') - 1) ELSE name END"
    expected = {(assignment, name): rest for assignment, name, *rest in query(
        out, f"SELECT assignment, {function} f, COUNT(*), SUM(status = 'passed'), "
             "SUM(status IN ('passed', 'failed', 'not_implemented', 'error')), SUM(points), SUM(max_points) "
             "FROM tests GROUP BY assignment, f")}
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
    assert expected[("resource_accounting", "written/W1")][2] == 0  # the unknown status: not in a pass rate
    header = [th.text for th in driver.find_elements("css selector", "#test-table thead th")]
    assert UNKNOWN_STATUS in header  # a status the report does not know has its own column


def test_every_submission_link_opens_its_page_with_its_score(site):
    out, index, driver = site
    driver.get(index.as_uri())
    links = [(a.get_attribute("href"), a.text) for a in driver.find_elements("css selector", "a.submission-link")]
    stored = {name: (status, score, maximum) for name, status, score, maximum in
              query(out, "SELECT name, status, score, max_score FROM submissions")}
    assert sorted(text for _, text in links) == sorted(stored)
    assert HOSTILE_NAME in stored  # shown as text, not run: an alert would stop the driver
    for href, name in links:
        driver.get(href)
        status, score, maximum = stored[name]
        assert driver.find_element("id", "submission-name").text == name
        if status == "graded":
            assert driver.title == f"{name}: {shown(rows_score(out, name))} / {shown(graded_max(out, name))}"
            assert driver.find_element("id", "score").text == shown(rows_score(out, name))
            (tests,), = query(out, "SELECT COUNT(*) FROM tests WHERE submission = ?", name)
            assert len(driver.find_elements("css selector", "table.tests tbody tr")) == tests
        else:
            assert driver.title == f"{name}: not graded"
        assert console_errors(driver) == [], name


def graded_max(out: Path, name: str) -> float:
    """The points graded here of one submission: its maximum less those awaiting hand grading or a GPU."""
    (found,), = query(out, "SELECT SUM(max_points) FROM tests WHERE submission = ? AND status NOT IN "
                      "('manual', 'not_graded')", name)
    return found or 0.0


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
    driver.get(index.as_uri())
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
        assert cells["total"] == (f"{shown(rows_score(out, name))} / {shown(graded_max(out, name))}"
                                  if status == "graded" else "-")
