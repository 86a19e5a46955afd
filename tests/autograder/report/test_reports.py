"""The report views of a GradeReport: terminal, Gradescope results.json, JUnit XML, Markdown, write_all.

Messages are treated as hostile throughout: they come from student code.
"""

import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from rich.console import Console

from autograder.report import feedback_markdown, junit_xml, results_json, write_all
from autograder.report.gradescope import schema
from autograder.report.markdown import cut
from autograder.report.terminal import gradebook_table, print_report
from autograder.report.text import clean
from autograder.model.results import GradeReport
from autograder.model.results import TestResult as Result

HOSTILE = "AssertionError: expected 12, got 10\n````\n# injected heading\n<script>x</script> [bold]no[/] \x1b[2J\x00"


def sample_report() -> GradeReport:
    ra, fa = "resource_accounting", "flash_attention"
    return GradeReport(
        submission="alice",
        tests=[
            Result("tests/resource_accounting/test_flops.py::test_matmul[2-3]", ra, 2, "passed",
                       checks="matmul_flops is 2mnp."),
            Result("tests/resource_accounting/test_flops.py::test_counter", ra, 3, "failed", message=HOSTILE,
                       checks="FlopCounter counts aten.mm.", hint="count addmm too"),
            Result("autograder/suites/resource_accounting/test_secret.py::test_secret_name", ra, 4, "failed",
                       message="secret message", visibility="hidden"),
            Result("autograder/suites/resource_accounting/test_secret.py::test_other_secret", ra, 1, "passed",
                       visibility="hidden"),
            Result("tests/flash_attention/test_triton.py::test_speed", fa, 5, "not_graded",
                       message="not graded here: needs a GPU"),
            Result("tests/flash_attention/test_triton.py::test_forward", fa, 5, "not_implemented",
                       message="NotImplementedError: flash_forward_triton is not implemented yet"),
            Result("tests/flash_attention/test_triton.py::test_backward", fa, 2, "error",
                       message="WorkerError: the worker died", visibility="after_due_date"),
            Result("tests/flash_attention/test_triton.py::test_import", fa, 1, "skipped",
                       message="triton cannot be installed on this OS"),
        ],
        log=["sandbox: bubblewrap active", "assignments graded: resource_accounting, flash_attention"],
        execution_time=12.5,
    )


def test_terminal_shows_every_test_and_the_summary_without_interpreting_the_message():
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    print_report(sample_report(), console)
    text = console.export_text()
    assert "test_flops.py::test_counter" in text and "0/3" in text and "not graded" in text
    assert "resource_accounting  3 / 10 points" in text
    assert "total 3 / 18 points; 5 more need a GPU, not graded here (not counted)" in text
    assert "sandbox: bubblewrap active" in text
    assert "\x1b" not in text and "\\x1b[2J" not in text  # only the first line is shown, escaped if present


def test_terminal_escapes_control_characters_and_markup():
    report = GradeReport("bob", [Result("t.py::test_a", "a", 1, "failed", message="[red]x[/] \x1b[2J")])
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    print_report(report, console)
    text = console.export_text()
    assert "[red]x[/] \\x1b[2J" in text and "\x1b" not in text


def test_results_json_follows_gradescopes_schema():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is an instructor dependency")
    validator = jsonschema.Draft202012Validator(schema())
    validator.check_schema(schema())
    results = json.loads(json.dumps(results_json(sample_report())))
    validator.validate(results)
    assert results["score"] == 3 and results["execution_time"] == 12.5
    assert results["extra_data"]["points"] == {"score": 3, "maximum": 18, "graded": 18, "by_hand": 0, "gpu": 5}
    assert results["output"].splitlines() == [
        "Score: 3 / 18 points; 5 more need a GPU, not graded here (not counted)",
        "maximum 18 points: 18 in the tests listed here",
        "not counted: 1 test worth 5 points needs a GPU, not graded here (listed as 0 / 0)",
        *sample_report().log]
    assert sum(t["max_score"] for t in results["tests"]) == 18


def test_the_schema_rejects_what_gradescope_does_not_know():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is an instructor dependency")
    results = results_json(sample_report())
    results["tests"][5]["status"] = "not_graded"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(results, schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"output": "no score anywhere"}, schema())


def test_gradescope_statuses_are_passed_or_failed_with_the_reason_first():
    tests = results_json(sample_report())["tests"]
    assert [t.get("status") for t in tests] == ["passed", "failed", "failed", "passed", None] + ["failed"] * 3
    outputs = [t["output"] for t in tests]
    assert outputs[4] == "not graded here: needs a GPU; worth 5 points where graded on a GPU"
    assert (tests[4]["score"], tests[4]["max_score"]) == (0, 0) and "needs a GPU" in tests[4]["name"]
    assert outputs[5].startswith("not implemented yet\nNotImplementedError")
    assert outputs[6].startswith("error: the test could not run\nWorkerError")
    assert outputs[7].startswith("skipped\ntriton cannot")
    assert outputs[1].startswith("failed\nAssertionError") and outputs[1].endswith("Hint: count addmm too")
    assert [t["visibility"] for t in tests][2:7] == ["hidden", "hidden", "visible", "visible", "after_due_date"]
    assert tests[0]["score"] == 2 and tests[1]["score"] == 0 and tests[3]["score"] == 1


def test_junit_xml_parses_back_with_one_suite_per_assignment():
    root = ET.fromstring(junit_xml(sample_report()))
    assert root.tag == "testsuites" and root.get("tests") == "8"
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["resource_accounting", "flash_attention"]
    ra, fa = suites["resource_accounting"], suites["flash_attention"]
    assert (ra.get("tests"), ra.get("failures"), ra.get("errors"), ra.get("skipped")) == ("4", "2", "0", "0")
    assert (fa.get("tests"), fa.get("failures"), fa.get("errors"), fa.get("skipped")) == ("4", "1", "1", "2")
    props = {p.get("name"): p.get("value") for p in ra.find("properties")}
    assert props == {"points": "3", "max_points": "10", "awaiting_hand_grading": "0", "not_counted_needing_a_gpu": "0"}
    cases = {c.get("name"): c for c in root.iter("testcase")}
    counter = cases["tests/resource_accounting/test_flops.py::test_counter"]
    assert counter.find("failure").text.startswith("failed\nAssertionError: expected 12, got 10")
    assert "\\x1b[2J\\x00" in counter.find("failure").text
    assert cases["tests/flash_attention/test_triton.py::test_speed"].find("skipped") is not None
    assert cases["tests/flash_attention/test_triton.py::test_backward"].find("error") is not None
    passed = cases["tests/resource_accounting/test_flops.py::test_matmul[2-3]"]
    assert len(passed) == 1 and {p.get("name"): p.get("value") for p in passed.find("properties")}["points"] == "2"


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_junit_xml_stays_valid_for_any_message(message):
    report = GradeReport("s", [Result("t.py::test_a", "a", 1, "failed", message=message)])
    failure = ET.fromstring(junit_xml(report)).find("testsuite/testcase/failure")
    assert failure is not None


def _fences(markdown: str) -> list[str]:
    return [token.content for token in MarkdownIt("commonmark").parse(markdown) if token.type == "fence"]


def test_markdown_summarises_and_details_visible_tests():
    text = feedback_markdown(sample_report())
    assert "Score: **3 / 18** points; 5 more need a GPU, not graded here (not counted).\n" in text
    assert "| `resource_accounting` | 3 / 10 | 2 | 2 | 0 | 0 | 0 | 2 (1 / 5) |" in text
    assert "| `flash_attention` | 0 / 8 | 0 | 1 | 1 | 0 | 1 (5 points) | 1 (0 / 2) |" in text
    assert "### `test_flops.py::test_counter`: failed, 0 / 3" in text
    assert "Checks: FlopCounter counts aten.mm." in text and "Hint: count addmm too" in text
    # Visible after the due date: only a count until the answers are released (test_answers_release.py).
    assert "test_backward" not in text
    assert "## To fix: 1 test (and 2 hidden)" in text


def test_markdown_never_shows_hidden_tests():
    text = feedback_markdown(sample_report())
    assert "secret" not in text


def test_markdown_keeps_the_hostile_message_inside_one_code_block():
    text = feedback_markdown(sample_report())
    tokens = MarkdownIt("commonmark").parse(text)
    assert not any(t.type == "html_block" for t in tokens)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert "injected heading" not in headings
    assert clean(HOSTILE) + "\n" in _fences(text)


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=st.sampled_from("`~ab\n#<>|*\\")))
def test_any_message_comes_back_verbatim_from_its_code_block(message):
    report = GradeReport("s", [Result("t.py::test_a", "a", 1, "failed", message=message)])
    expected = clean(cut(message))
    fences = _fences(feedback_markdown(report))
    assert fences == ([expected + "\n"] if expected else [])


def test_write_all_writes_four_views_and_the_lossless_report(tmp_path):
    report = sample_report()
    report.tests[1].message += " lone surrogate \ud800"
    write_all(report, tmp_path / "alice")
    files = sorted(p.name for p in (tmp_path / "alice").iterdir())
    assert files == ["feedback.md", "junit.xml", "report.json", "results.json"]
    assert GradeReport.from_json((tmp_path / "alice" / "report.json").read_text()) == report
    ET.parse(tmp_path / "alice" / "junit.xml")
    assert json.loads((tmp_path / "alice" / "results.json").read_text()) == results_json(report)
    assert "\\ud800" in (tmp_path / "alice" / "feedback.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("width", [60, 80, 160])
def test_the_gradebook_table_never_cuts_a_score(width):
    rows = [{"name": "mistake-unscaled-accumulation-" * 2, "status": "graded", "score": 411.5, "max_score": 465.5,
             "assignments": {"flash_attention": [192.0, 244.0], "resource_accounting": [219.5, 221.5]},
             "message": "54 GPU points not graded"},
            {"name": "bob", "status": "error", "score": None, "max_score": None, "assignments": {},
             "message": "Traceback ...\nRuntimeError: [red]boom[/red]"}]
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(gradebook_table(rows))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width  # nothing cropped at the edge
    cells = " ".join(re.findall(r"│([^│]*)", text))  # every cell's text, line after line
    for number in ("192", "244", "219.5", "221.5", "411.5", "465.5"):  # a score wraps at its spaces, whole
        assert re.search(rf"(?<![\d.]){re.escape(number)}(?![\d.])", cells), number
    assert re.search(r"│ graded\s*│", text) and re.search(r"│ error\s*│", text)  # statuses never cut
    if width >= 160:
        assert "192 / 244" in text and "219.5 / 221.5" in text and "411.5 / 465.5" in text  # wide enough for the note: an error's last line, printed as it is, not as markup
        assert "RuntimeError: [red]boom[/red]" in text
