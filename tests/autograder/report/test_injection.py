"""Feedback built from data: a student's failure messages, whatever Markdown or HTML they hold, stay text.

The attack of the third outside battery: two failure messages carrying the grader's own late-policy markers
and a code fence, a forged "## Score" heading and a "regrade form" link. The late policy's section once cut
the feedback between the markers (failures vanished) and the cohort report rendered the heading and a live
link. Here every construct a message could hold goes through a late batch, publish and the report site.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from markdown_it import MarkdownIt

from autograder.cohort.batch import run_batch
from autograder.cohort.course import AssignmentPolicy, LatePolicy
from autograder.cohort.late import ANY
from autograder.model.results import GradeReport, TestResult
from tests.autograder.report.test_gradebook import quiet

DUE = datetime(2027, 1, 20, 17, 0, tzinfo=timezone.utc)
HOSTILE = [
    "<!-- late policy -->\n```\n## Score: 221.5 / 221.5 (regrade approved by the staff)\n",
    "[Open the staff regrade form](https://regrade.example/form)\n<!-- /late policy -->",
    "# Heading\n---\n===\n> quote\n* item\n1. item\n<script>alert(1)</script><img src=x onerror=alert(1)>",
    "![image](https://tracker.example/p.png) <https://auto.example> www.auto.example https://bare.example",
    "| a | b |\n|---|---|\n| <b>x</b> | [l](javascript:alert(1)) |\n~~~\n````\n\\`\\`\\`",
    "[ref]: https://ref.example\n[ref]\n<a href='https://raw.example'>raw</a>\n&lt;&amp;&#x3c;",
]


def hostile_grade(path: Path) -> GradeReport:
    tests = [TestResult(f"tests/alpha/test_x.py::test_{i}", "alpha", 1.0, "failed", message=message)
             for i, message in enumerate(HOSTILE)]
    tests.append(TestResult("tests/alpha/test_x.py::test_fine", "alpha", 1.0, "passed"))
    return GradeReport(path.name, tests, log=["toy grader"])


def headings_and_links(html: str) -> tuple[list[str], list[str]]:
    headings = re.findall(r"<h[1-6][^>]*>(.*?)</h[1-6]>", html, flags=re.S)
    links = re.findall(r"<(?:a|img|script|iframe)\b[^>]*>", html)
    return headings, links


def test_hostile_messages_stay_text_in_the_feedback_and_the_report(tmp_path):
    cohort = tmp_path / "cohort"
    (cohort / "mallory").mkdir(parents=True)
    (cohort / "mallory" / "answers.txt").write_text("x")
    policy = LatePolicy({"alpha": AssignmentPolicy(DUE, "per_day", per_day=0.1)})
    out = tmp_path / "out"
    run_batch(cohort, out, grade_fn=hostile_grade, console=quiet(),
              late=(policy, {("mallory", ANY): DUE + timedelta(days=1)}))
    feedback = (out / "submissions" / "mallory" / "feedback.md").read_text()
    assert feedback.count("Late policy:") == 1
    for i in range(len(HOSTILE)):
        assert f"test_{i}" in feedback, f"failure {i} vanished from the feedback"
    # Rendered as CommonMark, the feedback's only headings are the grader's; no link or image anywhere.
    tokens = MarkdownIt("commonmark").parse(feedback)
    heading_text = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert not any("regrade" in h or h == "Heading" for h in heading_text), heading_text
    inline = [c for t in tokens if t.type == "inline" for c in t.children or []]
    assert not [c for c in inline if c.type in ("link_open", "image")], "a student's link renders in feedback.md"
    page = next((out / "report").rglob("*mallory*.html")).read_text()
    index = (out / "report" / "index.html").read_text()
    for html in (page, index):
        headings, links = headings_and_links(html)
        assert not any("regrade" in h or "Heading" in h for h in headings)
        off_site = [tag for tag in links if re.search(r"(?:href|src)\s*=\s*['\"]?(?:https?:|javascript:|//)", tag)]
        assert off_site == [], off_site
        assert "<script>alert" not in html and "onerror=alert(1)>" not in html


def test_hostile_messages_stay_text_in_nbgraders_feedback_page(tmp_path):
    """nbgrader's feedback page (feedback/<student>/<assignment>/<notebook>.html, what release_feedback hands
    the student) renders the same feedback.md: no heading from a message, no link, image or script."""
    from autograder.package.nbgrader import write_feedback

    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    report = hostile_grade(Path("mallory"))
    page = write_feedback(course, "alpha", "mallory", "alpha", report).read_text(encoding="utf-8")
    for i in range(len(HOSTILE)):
        assert f"test_{i}" in page, f"failure {i} vanished from the page"
    headings, links = headings_and_links(page)
    assert not any("regrade" in h or "Heading" in h for h in headings), headings
    assert links == [], links
    assert "<script>alert" not in page and "onerror=alert(1)>" not in page
