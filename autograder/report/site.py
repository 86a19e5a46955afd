"""The cohort report: a static site built from the gradebook, for the course staff.

    python -m autograder report OUT        (and `autograder batch` at its end)

writes OUT/report/index.html and one page per submission under OUT/report/submissions/. The site opens
from disk (file://), offline: the charts are SVG files drawn at build time with matplotlib, the style
sheet is a local file, and the one script (site.js, which sorts a table when its header is clicked) is a
local file the pages' Content-Security-Policy allows by origin; no page has inline script, and without
the script every table still reads in the gradebook's order.

What the index shows: each assignment's score distribution; who needs help (every student the term is going
wrong for: no submission, not gradable, a grader error, the lowest final scores; then the most tasks not
implemented and the most time-outs); each test function's pass rate, hardest first, with its most
common failure messages grouped (written answers graded by hand and the runs that could not run are left
out of it); the points of each task; the static checks' hits (a forbidden API, a broken Triton rule), apart
from the tests that failed by what the code computed; the submissions the grader could not grade and those
that are not gradable (each with its reason; neither is in the statistics), and the regrades that failed while
the earlier grade stands (that grade is in the statistics); the points that need a GPU and
were not graded here; and every submission, with its section where the gradebook holds a roster and its
penalised scores beside the raw ones where a late policy applies, and its final score (after the course
file's overrides and excusals, autograder.report.gradebook.finals_of: the number grades.csv and the LMS
exports hold), linked to its page (its tests as a table, its feedback.md rendered). Scores are shown out of
the maximum, beside the parts of it (autograder.report.parts), as in every other view. Every table scrolls
sideways inside the page when it is wider than the window.

Everything comes from the gradebook's rows as stored, read through one read-only connection: a status
this module does not know (a newer grader's) is shown as itself; a score is read from the test rows
(Submission.parts) and a final score through finals_of. Names and messages come from students, so Jinja2 escapes everything it writes, and the
feedback's Markdown is rendered with raw HTML turned off.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import statistics
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markdown_it import MarkdownIt

from autograder.report import one_folder, submission_folder
from autograder.report.gradebook import (MISSING, Final, failed_regrades_of, final_total, finals_of, late_rows,
                                         open_read_only, result_rows, roster_sections, roster_view, submission_rows)
from autograder.report.markdown import feedback_markdown
from autograder.report.site_charts import write_charts
from autograder.report.parts import NONE, Parts, after_penalty, by_assignment, parts_of
from autograder.report.text import REASONS, points, rounded
from autograder.model.results import GradeReport

REPORT_DIR = "report"
SIMILARITY_PAGE = "similarity.html"  # written beside index.html by the similarity check, when it runs
STYLE_SHEET = "site.css"
SCRIPT = "site.js"  # sorts the tables; beside index.html, allowed by the pages' policy as 'self'
TEMPLATES = "site_templates"
# A test the static checks failed (autograder.static: a forbidden API, a broken Triton rule) is stored as
# failed with the runner's message "static check: ..." (pytest.fail's "Failed: " before it). The report
# shows it as its own outcome, never among the failures of what the code computed.
STATIC_CHECK = "static_check"
STATIC_MESSAGE = re.compile(r"(?:Failed: )?static check: ")
# Written answers graded by hand (or waiting to be): not automated tests, so not in the hardest-tests list.
BY_HAND = ("manual", "hand_graded")
WRITTEN = "written/"  # the names of the written answers' results (autograder.written.answers.PREFIX)
# A pass rate counts the runs with these outcomes: a test that did not run here for a stated reason
# (not_graded, skipped) is left out, and so is one that could not run (error: a failed setup, an
# overloaded grader), and a status this module does not know (e.g. a newer grader's); each is shown in its
# own column and in the mean share of points instead.
COUNTED = ("passed", "failed", STATIC_CHECK, "not_implemented")
FAILURES = ("failed", "not_implemented")  # whose messages are grouped, per test
KNOWN = (*tuple(REASONS)[:2], STATIC_CHECK, *tuple(REASONS)[2:])  # passed, failed, then a static check's
# A call into the submission over its CPU budget, in the sandbox's words (autograder.sandbox.process); the
# calls not run after it ("already timed out") are its consequences, not time-outs of their own.
TIMED_OUT = re.compile(r"\btimed out after\b")
HELP_ROWS = 10  # submissions in each list of the "needs help" view
MESSAGE_GROUPS = 3  # most common failure messages shown per test
MESSAGE_WIDTH = 200  # characters of a message's first line kept for grouping


def label(status: str) -> str:
    """A status for a reader: the harness's words for the known ones, any other as itself."""
    return status.replace("_", " ") if status in KNOWN else status


def outcome(test: dict) -> str:
    """A test's status, except STATIC_CHECK for a failure the static checks made."""
    return STATIC_CHECK if test["status"] == "failed" and STATIC_MESSAGE.match(test["message"]) else test["status"]


def timed_out(test: dict) -> bool:
    return test["status"] != "passed" and bool(TIMED_OUT.search(test["message"]))


def by_hand(test: dict) -> bool:
    """A written answer, graded by hand or waiting to be."""
    return test["status"] in BY_HAND or test["name"].startswith(WRITTEN)


def css_class(status: str) -> str:
    return f"status-{status}" if status in KNOWN else "status-other"


def function_name(test_name: str) -> str:
    """The test function: `tests/a/test_x.py::test_y` for `tests/a/test_x.py::test_y[case]`."""
    return test_name.split("[", 1)[0]


def short(test_name: str) -> str:
    """`test_x.py::test_y[case]` for `tests/a/test_x.py::test_y[case]`."""
    path, sep, rest = test_name.partition("::")
    return path.rsplit("/", 1)[-1] + sep + rest


def first_line(message: str) -> str:
    line = next((line.strip() for line in message.splitlines() if line.strip()), "")
    return line if len(line) <= MESSAGE_WIDTH else line[: MESSAGE_WIDTH - 3] + "..."


def last_line(message: str) -> str:
    """An error's last line: the exception itself, after any traceback."""
    return first_line("\n".join(reversed(message.splitlines())))


def page_name(index: int, name: str) -> str:
    """A submission page's file name: its position, then its name reduced to safe characters."""
    return f"submissions/{index:04d}-{re.sub(r'[^A-Za-z0-9_-]+', '_', name)[:60]}.html"


@dataclass
class Submission:
    name: str
    status: str
    message: str
    graded_at: str
    page: str
    tests: list[dict] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    feedback: str = ""  # Markdown
    section: str = ""  # the roster's, where the gradebook holds one
    late: dict[str, dict] = field(default_factory=dict)  # assignment -> the late policy's row, where one applies
    final: dict[str, Final] = field(default_factory=dict)  # assignment -> its final score (finals_of), where scored
    regrade_failure: dict | None = None  # {digest, at, message} of a regrade that failed, the grade standing
    # The sums over the tests, each made once: every table of the index reads them again.
    _sums: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def graded(self) -> bool:
        return self.status == "graded"

    @property
    def not_gradable(self) -> bool:
        return self.status == "not_gradable"

    @property
    def missing(self) -> bool:
        return self.status == MISSING

    def final_total(self) -> tuple[float, float] | None:
        """(the final score, its maximum), excused assignments left out; None where there is no score."""
        return final_total(self.final) if self.final or self.missing else None

    def adjusted(self) -> dict[str, Final]:
        """The assignments whose final score the course file set (an override, or excused)."""
        return {name: f for name, f in self.final.items() if f.adjusted}

    def parts(self) -> Parts:
        """The score and the parts of its maximum (autograder.report.parts), from the stored test rows."""
        if "parts" not in self._sums:
            self._sums["parts"] = parts_of(self.tests) if self.graded else NONE
        return self._sums["parts"]

    def assignment_parts(self) -> dict[str, Parts]:
        if "assignments" not in self._sums:
            self._sums["assignments"] = by_assignment(self.tests) if self.graded else {}
        return self._sums["assignments"]

    def count(self, status: str) -> int:
        """Tests of this outcome (a static check's failure is STATIC_CHECK, not failed)."""
        return sum(outcome(t) == status for t in self.tests)

    def share(self) -> float | None:
        """The final score's share of its maximum (None when there is no score, or a maximum of 0)."""
        total = self.final_total()
        return total[0] / total[1] if total and total[1] else None

    def penalised(self) -> dict[str, float]:
        """Each assignment's score after its late penalty (the raw one where none applies), computed from the
        current raw score as Gradebook.late() does, and under "" their sum: grades.csv's numbers."""
        scores = {name: after_penalty(p.score, self.late[name]["penalty"]) if name in self.late else rounded(p.score)
                  for name, p in self.assignment_parts().items()}
        return {**scores, "": rounded(sum(scores.values()))} if self.graded else {}

    def not_implemented_tasks(self) -> list[str]:
        """The tasks (assignment: task) with a test that found the stub still in place."""
        return sorted({f"{t['assignment']}: {t['task']}" for t in self.tests if t["status"] == "not_implemented"})

    def timeouts(self) -> int:
        """Tests whose call into the submission ran over its CPU budget."""
        return sum(timed_out(t) for t in self.tests)

    def static_hits(self) -> list[dict]:
        return [t for t in self.tests if outcome(t) == STATIC_CHECK]

    def gpu_points(self) -> float:
        return sum(t["max_points"] for t in self.tests if t["status"] == "not_graded")

    def others(self) -> Counter:
        """Counts of the outcomes other than passed, failed and a static check's, by outcome."""
        return Counter(o for o in map(outcome, self.tests) if o not in ("passed", "failed", STATIC_CHECK))


def load(out: Path) -> list[Submission]:
    """Every submission of the gradebook in OUT, with its tests (each with its task, from the stored
    report) and its feedback (OUT/submissions/<name>/feedback.md, else rebuilt from the stored report)."""
    db = open_read_only(out / "gradebook.sqlite")
    try:
        rows, results, late, sections = submission_rows(db), result_rows(db), late_rows(db), roster_sections(db)
        final, failures = finals_of(db), failed_regrades_of(db)
    finally:
        db.close()
    lateness: dict[str, dict[str, dict]] = {}
    for row in late:
        lateness.setdefault(row["submission"], {})[row["assignment"]] = row
    tests: dict[str, list[dict]] = {}
    for result in results:
        tests.setdefault(result["submission"], []).append(result)
    submissions = []
    for index, row in enumerate(rows):
        stored = json.loads(row["report"]) if row.get("report") else {}
        mine = tests.get(row["name"], [])
        _add_details(mine, stored.get("tests", []))
        submissions.append(Submission(
            name=row["name"], status=row["status"], message=row["message"], graded_at=row["graded_at"],
            page=page_name(index, row["name"]), tests=mine, log=stored.get("log", []),
            feedback=_feedback(out, row["name"], row.get("report")) if row["status"] != "error" else "",
            section=sections.get(row["name"], ""), late=lateness.get(row["name"], {}),
            final=final.get(row["name"], {}), regrade_failure=failures.get(row["name"])))
    return submissions


def _add_details(tests: list[dict], stored: list[dict]) -> None:
    """Each test's task and what it checks, from the stored report (the same test at the same position);
    a result the report does not hold (e.g. one added by hand) gets its name's first part as task."""
    for test in tests:
        position = test["position"]
        detail = stored[position] if position < len(stored) and stored[position].get("name") == test["name"] else {}
        test["task"] = detail.get("task") or test["name"].split("/", 1)[0]
        test["checks"] = detail.get("checks", "")


def _feedback(out: Path, name: str, report: str | None) -> str:
    path = submission_folder(out, name) / "feedback.md"
    if one_folder(out, name) and path.is_file():
        return path.read_text(encoding="utf-8", errors="replace")
    try:
        return feedback_markdown(GradeReport.from_json(report)) if report else ""
    except (ValueError, TypeError, KeyError):
        return ""  # a report this version cannot read: the page still shows the tests


# --- the cohort's figures ---------------------------------------------------------------------------

def stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0, "mean": None, "median": None, "min": None, "max": None}
    return {"n": len(values), "mean": statistics.fmean(values), "median": statistics.median(values),
            "min": min(values), "max": max(values)}


def assignment_figures(submissions: list[Submission]) -> list[dict]:
    """Per assignment: its maximum (the one rule: autograder.report.parts), the points of it awaiting hand
    grading and those needing a GPU (not counted), and the distribution of the graded submissions' final
    scores (excused ones left out)."""
    graded = [s for s in submissions if s.graded]
    names = sorted({a for s in graded for a in s.assignment_parts()})
    figures = []
    for name in names:
        parts = [s.assignment_parts()[name] for s in graded if name in s.assignment_parts()]
        scores = [s.final[name].final for s in graded if name in s.final and s.final[name].final is not None]
        figures.append({"name": name, "max_score": max(p.maximum for p in parts), "scores": scores, **stats(scores),
                        "by_hand": max(p.by_hand for p in parts), "gpu_points": max(p.gpu for p in parts)})
    return figures


def pass_rates(submissions: list[Submission]) -> list[dict]:
    """One row per test function (its parametrised cases together) over all graded submissions: counts by
    outcome, pass rate among the runs that count (COUNTED), share of the points; hardest first. Written
    answers (graded by hand) are not tests of the code and are left out."""
    rows: OrderedDict[tuple[str, str], dict] = OrderedDict()
    for submission in submissions:
        for test in (t for t in submission.tests if not by_hand(t)):
            key = (test["assignment"], function_name(test["name"]))
            row = rows.setdefault(key, {"assignment": key[0], "name": key[1], "short": short(key[1]),
                                        "task": test["task"], "cases": set(), "visibility": set(),
                                        "statuses": Counter(), "points": 0.0, "max_points": 0.0,
                                        "messages": Counter()})
            row["cases"].add(test["name"])
            row["visibility"].add(test["visibility"])
            row["statuses"][outcome(test)] += 1
            row["points"] += test["points"]
            row["max_points"] += test["max_points"]
            if outcome(test) in FAILURES:
                row["messages"][first_line(test["message"]) or label(test["status"])] += 1
    for row in rows.values():
        runs = sum(row["statuses"].values())
        counted = sum(row["statuses"][s] for s in COUNTED)
        row.update(runs=runs, counted=counted, cases=len(row["cases"]), visibility=sorted(row["visibility"]),
                   passed=row["statuses"]["passed"],
                   pass_rate=row["statuses"]["passed"] / counted if counted else None,
                   share=row["points"] / row["max_points"] if row["max_points"] else None,
                   top_messages=row["messages"].most_common(MESSAGE_GROUPS),
                   other_messages=len(row["messages"]) - min(len(row["messages"]), MESSAGE_GROUPS))
    return sorted(rows.values(), key=lambda r: (r["pass_rate"] is None, r["pass_rate"] or 0.0,
                                                r["share"] or 0.0, r["assignment"], r["name"]))


def task_points(submissions: list[Submission]) -> list[dict]:
    """Per assignment and task: its maximum, the mean points, how many graded submissions got them all,
    and the points of its tests that were not graded here (GPU)."""
    graded = [s for s in submissions if s.graded]
    per: OrderedDict[tuple[str, str], list[tuple[float, float, float]]] = OrderedDict()
    for submission in graded:
        sums: dict[tuple[str, str], list[float]] = {}
        for test in submission.tests:
            got = sums.setdefault((test["assignment"], test["task"]), [0.0, 0.0, 0.0])
            got[0] += test["points"]
            got[1] += test["max_points"]
            got[2] += test["max_points"] if test["status"] == "not_graded" else 0.0
        for key, value in sums.items():
            per.setdefault(key, []).append(tuple(value))
    rows = []
    for (assignment, task), values in sorted(per.items()):
        maximum = max(v[1] for v in values)
        mean = statistics.fmean(v[0] for v in values)
        rows.append({"assignment": assignment, "task": task, "max_points": maximum, "mean": mean,
                     "fraction": mean / maximum if maximum else None, "gpu_points": max(v[2] for v in values),
                     "full": sum(v[0] == v[1] and v[1] > 0 for v in values), "n": len(values)})
    return rows


def gpu_not_graded(submissions: list[Submission]) -> list[dict]:
    """The test functions not graded for want of a GPU: their points per submission and how many
    submissions they were not graded for."""
    rows: OrderedDict[tuple[str, str], dict] = OrderedDict()
    for submission in submissions:
        mine: dict[tuple[str, str], float] = {}
        for test in submission.tests:
            if test["status"] == "not_graded":
                key = (test["assignment"], function_name(test["name"]))
                mine[key] = mine.get(key, 0.0) + test["max_points"]
        for key, value in mine.items():
            row = rows.setdefault(key, {"assignment": key[0], "name": key[1], "short": short(key[1]),
                                        "points": 0.0, "submissions": 0})
            row["points"] = max(row["points"], value)
            row["submissions"] += 1
    return sorted(rows.values(), key=lambda r: (r["assignment"], r["name"]))


def needs_help(submissions: list[Submission], rows: int = HELP_ROWS) -> dict[str, list[Submission]]:
    """Who needs help. "going_wrong": every student the term is going wrong for, whatever their number: no
    submission, not gradable, a grader error (each needs someone to act), then the `rows` lowest shares of
    the final score (after the late policy and the course file's overrides: a penalised score counts as
    penalised, an excused assignment not at all; full marks left out). Then two signs among the graded, each
    list of at most `rows`, the clearest sign first (ties: the lower share, then the name): "not_implemented"
    the most tasks whose stub is still in place, "timeouts" the most calls that ran over their CPU budget."""
    shares = {s.name: s.share() for s in submissions if s.share() is not None}
    graded = [s for s in submissions if s.name in shares and s.graded]
    scored = [s for s in submissions if s.name in shares]

    def ranked(sign, among: list[Submission]) -> list[Submission]:
        """The submissions with a sign (a negative number: the more negative, the clearer), clearest first."""
        found = sorted((sign(s), shares[s.name], s.name, index) for index, s in enumerate(among))
        return [among[index] for value, _, _, index in found if value < 0][:rows]

    unscored = [s for kind in (MISSING, "not_gradable", "error") for s in submissions if s.status == kind]
    low = [s for s in ranked(lambda s: shares[s.name] - 1, scored) if not s.missing]
    return {"going_wrong": unscored + low,
            "not_implemented": ranked(lambda s: -len(s.not_implemented_tasks()), graded),
            "timeouts": ranked(lambda s: -s.timeouts(), graded)}


def static_check_hits(submissions: list[Submission]) -> list[dict]:
    """Per submission with a static check's hit: its distinct messages (the rule broken, where) and the
    tests that failed by them, by assignment."""
    rows = []
    for submission in submissions:
        hits = submission.static_hits()
        if hits:
            messages = Counter(STATIC_MESSAGE.sub("", t["message"], count=1) for t in hits)
            rows.append({"submission": submission, "tests": len(hits), "messages": messages.most_common(),
                         "assignments": sorted({t["assignment"] for t in hits})})
    return rows


# --- the site ---------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def environment() -> Environment:
    """The templates' environment, made once per process: compiling the templates costs more than the rest of
    a cohort report of a few dozen submissions (a publish after each step of a term writes it)."""
    env = Environment(loader=PackageLoader("autograder.report", TEMPLATES), autoescape=select_autoescape(
        enabled_extensions=("html",), default_for_string=True, default=True), undefined=StrictUndefined,
        trim_blocks=True, lstrip_blocks=True)
    env.filters.update(points=lambda v: "-" if v is None else points(round(v, 2)), label=label, css_class=css_class,
                       percent=lambda v: "-" if v is None else f"{100 * v:.1f}%", short=short,
                       first_line=first_line, last_line=last_line, outcome=outcome)
    return env


# CommonMark with GitHub's tables, raw HTML off and no links or images: a student's text can only ever be
# text, and nothing on a page leads off the site.
MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table").disable(["link", "image", "autolink"])


# The HTML comments that mark a feedback.md's sections (autograder.cohort.late): a rendering with raw HTML off
# would show them as text; only a whole line that is exactly such a mark is taken out (a student's text can
# put one nowhere but inside a fenced block, where it stays).
SECTION_MARK = re.compile(r"^<!-- /?[a-z ]+ -->$")


def without_marks(text: str) -> str:
    """A feedback.md's text without its section marks, for rendering."""
    lines, fence = [], None
    for line in text.splitlines():
        opened = re.match(r"^(`{3,})", line)
        if opened and (fence is None or opened.group(1).startswith(fence)):
            fence = None if fence else opened.group(1)
        if fence is None and not opened and SECTION_MARK.match(line):
            continue
        lines.append(line)
    return "\n".join(lines)


def render_markdown(text: str) -> str:
    """`text` as HTML; a table column's alignment becomes a class (the pages' policy allows no inline style)."""
    tokens = MARKDOWN.parse(text)
    for token in tokens:
        align = re.fullmatch(r"text-align:(left|right|center)", token.attrGet("style") or "")
        if token.type in ("th_open", "td_open") and align:
            token.attrs.pop("style")
            token.attrSet("class", f"align-{align.group(1)}")
    return MARKDOWN.renderer.render(tokens, MARKDOWN.options, {})


def write_site(out: Path) -> Path:
    """Write OUT/report/ from OUT/gradebook.sqlite (replacing the report written before) and return the
    path of its index.html. FileNotFoundError when OUT has no gradebook."""
    out = Path(out)
    submissions = load(out)
    site = out / REPORT_DIR
    for stale in ("submissions", "charts"):
        shutil.rmtree(site / stale, ignore_errors=True)
    (site / "submissions").mkdir(parents=True, exist_ok=True)
    env = environment()
    for name in (STYLE_SHEET, SCRIPT):
        shutil.copyfile(Path(__file__).with_name(TEMPLATES) / name, site / name)
    assignments = assignment_figures(submissions)
    charts = write_charts(site / "charts", assignments, [s.final_total()[0] for s in submissions if s.graded])
    built = datetime.now(timezone.utc).isoformat(timespec="seconds")
    index = site / "index.html"
    tests = pass_rates(submissions)
    index.write_text(env.get_template("index.html").render(
        root="", built=built, script=SCRIPT, submissions=submissions, assignments=assignments, charts=charts,
        tests=tests, tasks=task_points(submissions), gpu=gpu_not_graded(submissions),
        errors=[s for s in submissions if s.status == "error"], missing=[s for s in submissions if s.missing],
        failed_regrades=[s for s in submissions if s.regrade_failure],
        adjusted=any(s.adjusted() for s in submissions),
        not_gradable=[s for s in submissions if s.not_gradable], test_errors=[s for s in submissions if s.count("error")],
        similarity=(site / SIMILARITY_PAGE).is_file(), grades_csv=(out / "grades.csv").is_file(),
        statuses=_statuses(tests), help=needs_help(submissions), help_rows=HELP_ROWS,
        static=static_check_hits(submissions),
        sections=any(s.section for s in submissions), late=any(s.late for s in submissions if s.graded),
        roster=roster_view(out / "gradebook.sqlite")),
        encoding="utf-8")
    page = env.get_template("submission.html")
    for submission in submissions:
        (site / submission.page).write_text(page.render(
            root="../", built=built, script="", s=submission, assignments=_by_assignment(submission.tests),
            feedback=render_markdown(without_marks(submission.feedback)) if submission.feedback else ""),
            encoding="utf-8")
    return index


def _statuses(tests: list[dict]) -> list[str]:
    """Every outcome in the hardest-tests list, the known ones in the harness's order, then any other."""
    found = {status for row in tests for status in row["statuses"]}
    return [s for s in KNOWN if s in found] + sorted(found - set(KNOWN))


def _by_assignment(tests: list[dict]) -> "OrderedDict[str, list[dict]]":
    groups: OrderedDict[str, list[dict]] = OrderedDict()
    for test in tests:
        groups.setdefault(test["assignment"], []).append(test)
    return groups

