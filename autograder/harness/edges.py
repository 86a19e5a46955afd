"""Edge cases count only with the ordinary case: the points of tests marked `edge`.

A test marked `edge` checks an edge case, a rejection or one property of a task (an empty tensor's
bytes, a ValueError for a bad size, the saved memory of a checkpointed forward), or how the task
works rather than what it computes (how often it calls its argument, which kernels it launches, its
GPU build, its speed). A constant answer, a function that refuses every input, or made-up values
behind the right motions can meet such a test alone; so its points count only when the task's
ordinary tests (those of the same task, not marked `edge`: the values it computes) ran and all
passed. An edge test never waits for another edge test, so a build or speed rule it breaks costs a
correct function that rule's points, not its rejections'. Tests that
could not run here (a GPU test on a CPU, a skip) neither help nor hurt. A visible test's message
names a hidden test only as "a hidden test".
"""

from __future__ import annotations

import dataclasses

from autograder.model.results import GradeReport, TestResult

UNCOUNTED = ("not_graded", "skipped")


def settle(report: GradeReport, edges: set[str]) -> dict[str, str]:
    """Fail, in `report`, every passed edge test whose task's ordinary tests did not all pass; return, for each
    test failed so, the ordinary test it waits for as its message names it (a visible one to a visible test,
    else "a hidden test of it"; "" when none of them ran)."""
    waiting = {}
    for index, test in enumerate(report.tests):
        if test.name not in edges or test.status != "passed":
            continue
        ordinary = [t for t in report.tests if t.assignment == test.assignment and t.task == test.task
                    and t.name not in edges and t.status not in UNCOUNTED]
        failing = [t for t in ordinary if t.status != "passed"]
        if ordinary and not failing:
            continue
        shown = [t for t in failing if t.visibility == "visible" or test.visibility != "visible"]
        waiting[test.name] = shown[0].name if shown else "a hidden test of it" if failing else ""
        why = (f"{shown[0].name} did not pass" if shown else "a hidden test of it did not pass" if failing
               else "none of them ran")
        report.tests[index] = dataclasses.replace(
            test, status="failed",
            message=f"this edge case counts only when the ordinary tests of {test.task or 'its task'} pass: {why}")
    return waiting
