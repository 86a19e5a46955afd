"""JUnit XML: one testsuite per assignment, the form CI systems and test dashboards read.

failed and not_implemented become <failure>, error becomes <error>, not_graded, skipped and manual (a
written answer still to be graded by hand) become <skipped> (with the reason); hand_graded is a plain
testcase; points travel as <properties>: each test's points and max_points, and each testsuite's score out
of its maximum (autograder.report.parts: the one rule, the same as in every view) with the points of it
awaiting hand grading and those needing a GPU (not counted). Text is cleaned first, since XML 1.0
cannot hold most control characters and a student's message may contain any.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from autograder.report.parts import parts_of
from autograder.report.text import clean, explanation, points, reason
from autograder.model.results import GradeReport, TestResult

ELEMENTS = {"failed": "failure", "not_implemented": "failure", "error": "error",
            "not_graded": "skipped", "skipped": "skipped", "manual": "skipped"}


def _properties(parent: ET.Element, **values: str) -> None:
    element = ET.SubElement(parent, "properties")
    for name, value in values.items():
        ET.SubElement(element, "property", name=name, value=value)


def _testcase(suite: ET.Element, test: TestResult) -> None:
    case = ET.SubElement(suite, "testcase", classname=test.assignment, name=clean(test.name), time="0")
    _properties(case, points=points(test.points), max_points=points(test.max_points),
                visibility=test.visibility, status=test.status)
    if test.status in ELEMENTS:
        outcome = ET.SubElement(case, ELEMENTS[test.status], message=reason(test), type=test.status)
        outcome.text = explanation(test)


def _counts(tests: list[TestResult]) -> dict[str, str]:
    kinds = [ELEMENTS.get(t.status) for t in tests]
    return {"tests": str(len(tests)), "failures": str(kinds.count("failure")),
            "errors": str(kinds.count("error")), "skipped": str(kinds.count("skipped"))}


def junit_xml(report: GradeReport) -> str:
    root = ET.Element("testsuites", name=clean(report.submission), time=f"{report.execution_time:.3f}",
                      **_counts(report.tests))
    for assignment, tests in report.by_assignment().items():
        suite = ET.SubElement(root, "testsuite", name=assignment, time="0", **_counts(tests))
        parts = parts_of(tests)
        _properties(suite, points=points(parts.score), max_points=points(parts.maximum),
                    awaiting_hand_grading=points(parts.by_hand), not_counted_needing_a_gpu=points(parts.gpu))
        for test in tests:
            _testcase(suite, test)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
