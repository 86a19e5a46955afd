"""Every point figure a handout states, computed from the suites and the written questions.

The points come from where the grader takes them: the points markers of the public tests (tests/<A>/) and of
the hidden suites (autograder/suites/<A>/), as pytest collects them (tests/tooling/collected.py), and the
points of the written questions as the grader parses them from the handout. Each handout's figures (its
appendix's totals, the points of the build and program-order checks, the GPU points) must be written as
computed here, and each row of its tables of public tests must have the test's cases, points per case and
marks (edge, GPU) as the suite has them.
"""

from __future__ import annotations

import inspect
import re
from collections import defaultdict
from pathlib import Path

import pytest

from autograder.written.answers import handout_questions
from kernels.course import packages
from tests.tooling.collected import Collected, collected

ROOT = Path(__file__).resolve().parents[2]


def handout(name: str) -> str:
    return (ROOT / "solutions" / name / "README.md").read_text(encoding="utf-8")


def says(name: str, figure: str) -> bool:
    """Whether the handout writes `figure`, however its lines are broken."""
    return " ".join(figure.split()) in " ".join(handout(name).split())


def total(tests) -> str:
    """A sum of points as the handouts write it: 54, 57.5."""
    return f"{sum(t.points for t in tests):g}"


def of(name: str, public: bool | None = None, gpu: bool | None = None, files: tuple[str, ...] = (),
       named: str = "") -> list[Collected]:
    """The collected tests of an assignment, filtered: public or hidden, needing a GPU or not, in these files, whose
    function's name contains `named`."""
    return [t for t in collected() if t.assignment == name and (public is None or t.public == public)
            and (gpu is None or t.gpu == gpu) and (not files or t.nodeid.split("::")[0].rsplit("/", 1)[1] in files)
            and named in t.function]


def written(name: str) -> tuple[str, str, str]:
    """(all, graded automatically, by hand) points of an assignment's written questions."""
    questions = handout_questions(name)
    auto = sum(part.points for q in questions for part in q.parts)
    return f"{sum(q.points for q in questions):g}", f"{auto:g}", f"{sum(q.points for q in questions) - auto:g}"


def figures() -> list[tuple[str, str]]:
    """(handout, the figure as it writes it) for every point figure the handouts state."""
    found = []
    ra = "resource_accounting"
    found += [
        (ra, f"all {total(of(ra, public=True))} public points"),
        (ra, f"Only {total(of(ra, public=False, gpu=True))} points of the hidden"),
        (ra, f"Two hidden tests (1 point each)" if [t.points for t in of(ra, public=False, gpu=True)] == [1, 1]
         else "the GPU tests are no longer two of 1 point each"),
        (ra, f"| points | {total(of(ra, public=True))} | {total(of(ra, public=False))} "
             f"({total(of(ra, public=False, gpu=True))} need a GPU) | {written(ra)[0]} | "
             f"{sum(t.points for t in of(ra)) + float(written(ra)[0]):g} |"),
        (ra, "Q6.1 (4 points), Q9.1 (3 points) and Q10.1 (3 points), " + f"{written(ra)[0]} points in all"),
    ]
    gk = "gpu_kernels"
    counting = ("test_cost.py", "test_measure.py", "test_hidden_cost.py", "test_hidden_measure.py")
    kernel_files = tuple({t.nodeid.split("::")[0].rsplit("/", 1)[1] for t in of(gk)} - set(counting))
    order = of(gk, public=False, named="any_program_order")
    build = [t for t in of(gk, public=False, files=("test_gpu_compile.py",)) if t not in order]
    rows = {}
    for label, files in (("the kernels, §2 to §4", kernel_files), ("counting and measuring, §5 to §7", counting)):
        public, hidden = of(gk, public=True, files=files), of(gk, public=False, files=files)
        rows[label] = (public, hidden)
        found.append((gk, f"| {label} | {total(public)} ({total(of(gk, True, True, files))} need a GPU) | "
                          f"{total(hidden)} ({total(of(gk, False, True, files))} need a GPU) | | "
                          f"{sum(t.points for t in public + hidden):g} |"))
    kernels_public, kernels_hidden = rows["the kernels, §2 to §4"]
    loads = {t.nodeid.rsplit("[", 1)[-1].rstrip("]"): t.points for t in of(gk, public=False, named="gelu_kernel_loads")}
    found += [
        (gk, f"| theory questions, §8 | | | {written(gk)[0]} | {written(gk)[0]} |"),
        (gk, f"| in all | {total(of(gk, public=True))} | {total(of(gk, public=False))} | {written(gk)[0]} | "
             f"{sum(t.points for t in of(gk)) + float(written(gk)[0]):g} |"),
        (gk, f"Kernel points: {total(kernels_public)} public ({total(of(gk, True, True, kernel_files))} of them need "
             f"a GPU), {total(kernels_hidden)} hidden ({total(of(gk, False, True, kernel_files))} need a GPU; "
             f"{total(of(gk, files=('test_hidden_kernels_design.py',)))} are the design checks, {total(build)} the "
             f"build checks and {total(order)} the program-order checks"),
        (gk, f"The design checks (hidden, edge, {total(of(gk, files=('test_hidden_kernels_design.py',)))} points"),
        (gk, f"{total(build)} points, hidden, each only for a kernel right"),
        (gk, f"reads the GeLU's build ({loads['bf16']:g} points in bf16, {loads['fp16']:g} in fp16, "
             f"{sum(loads.values()):g} in all)" if set(loads) == {"bf16", "fp16"}
         else "the GeLU's load check is no longer one case per build dtype"),
        (gk, "still a stub loses the matmul's build points "
             f"({total([t for t in build if '::test_matmul' in t.nodeid])})"),
        (gk, f"Hidden, edge, {order[0].points:g} points per kernel" if {t.points for t in order} == {order[0].points}
         else "the program-order cases no longer have equal points"),
        (gk, f"Public total for §5 to §7: {total(rows['counting and measuring, §5 to §7'][0])} points, "
             f"{total(of(gk, True, True, counting))} of them on a GPU"),
        (gk, f"The hidden tests of §5 to §7 ({total(rows['counting and measuring, §5 to §7'][1])} points, "
             f"{total(of(gk, False, True, counting))} of them on a GPU)"),
        (gk, f"The theory questions (§8) are {written(gk)[0]} points: {written(gk)[1]} graded automatically"),
        (gk, f"and {written(gk)[2]} by hand by the rubrics"),
    ]
    fa = "flash_attention"
    half = of(fa, public=True, gpu=True, named="half_precision")
    speed = of(fa, public=True, gpu=True, named="faster")
    fa_order = of(fa, public=False, named="any_program_order")
    questions = handout_questions(fa)
    found += [
        (fa, f"| points | {total(of(fa, public=True))} ({total(of(fa, True, True))} need a GPU) | "
             f"{total(of(fa, public=False))} ({total(of(fa, False, True))} need a GPU) | {written(fa)[0]} | "
             f"{sum(t.points for t in of(fa)) + float(written(fa)[0]):g} |"),
        (fa, f"Of the {total(of(fa, public=True))} public points, {total(of(fa, True, True))} need a GPU"),
        (fa, f"forward and gradients, {total(half)} points; the two speed targets of §10, {total(speed)} points"
         if len(speed) == 2 and len(half) + len(speed) == len(of(fa, True, True)) else "the GPU tests changed"),
        (fa, f"everything else, {total(of(fa, True, False))} points"),
        (fa, f"The hidden suite has {total(of(fa, False, True))} more GPU points"),
        (fa, f"Hidden, {total(of(fa, public=False, named='kernels_build'))} points "
             f"({total(of(fa, public=False, named='forward_kernels_build'))} for the forward, "
             f"{total(of(fa, public=False, named='backward_kernels_build'))} for the backward)"),
        (fa, f"Hidden, edge, {fa_order[0].points:g} points for the forward and {fa_order[1].points:g} for the backward"),
        (fa, f"(hidden: {total(of(fa, public=False, named='triton_causal_forward_skips'))} points for the forward's "
             f"count and {total(of(fa, public=False, named='triton_causal_backward_skips'))} for the backward's)"),
        (fa, ", ".join(f"{q.id} {q.points:g}" + (" points" if i == 0 else "") for i, q in enumerate(questions))
         + f", {written(fa)[0]} points in all"),
    ]
    return found


def test_the_collection_covers_every_assignment():
    assert {t.assignment for t in collected()} == set(packages())
    assert all(t.points > 0 for t in collected())


@pytest.mark.parametrize("name, figure", figures(), ids=[f"{n}-{i}" for i, (n, _) in enumerate(figures())])
def test_the_handout_states_the_points_the_suites_give(name, figure):
    assert says(name, figure), f"{name}/README.md should say {figure!r} (computed from the suites' points markers)"


ROW = re.compile(r"^\| `(test_\w+)(?:\[[^\]]*\])?`((?: \([^)]*\))?) \| ([^|]+?) \|", re.M)


def table_rows(text: str) -> list[tuple[str, set[str], int, float]]:
    """(test, its marks, cases, points per case) for each row of a handout's tables of public tests."""
    rows = []
    for test, marks, points in ROW.findall(text):
        cell = re.fullmatch(r"(?:(\d+) × )?(\d+(?:\.\d+)?)", points)
        assert cell, f"`{test}`: its points read {points!r}; write p, or n × p for n cases of p points each"
        rows.append((test, {m.strip() for m in marks.strip(" ()").split(",") if m.strip()},
                     int(cell.group(1) or 1), float(cell.group(2))))
    return rows


@pytest.mark.parametrize("name", ["resource_accounting", "gpu_kernels"])
def test_each_table_row_has_the_tests_cases_points_and_marks(name):
    public = defaultdict(list)
    for t in of(name, public=True):
        public[t.function].append(t)
    rows = table_rows(handout(name))
    assert sorted(r[0] for r in rows) == sorted(public), "the tables list every public test once"
    for test, marks, cases, each in rows:
        tests = public[test]
        expected = {mark for mark, has in (("edge", tests[0].edge), ("GPU", tests[0].gpu)) if has}
        assert (cases, each, marks) == (len(tests), tests[0].points, expected), (
            f"{name}: `{test}` should read {len(tests)} × {tests[0].points:g} (or {tests[0].points:g} alone) with the "
            f"marks {sorted(expected)}, not {cases} × {each:g} {sorted(marks)}")
        assert {t.points for t in tests} == {each}, f"{test}: its cases have different points"


def test_a_failing_case_is_named_by_what_it_runs_not_by_its_index():
    """pytest names a case whose values it cannot print by its index, `config0`: a student whose config2 fails cannot
    tell which sizes did, nor find the row of the handout's table. Every case of the public tests is named by its
    values (ids=)."""
    assert [t.nodeid for t in collected() if t.public and t.opaque] == []


def test_flash_attention_names_every_public_test():
    text = handout("flash_attention")
    assert [t for t in {t.function for t in of("flash_attention", public=True)} if f"`{t}`" not in text] == []


def test_the_hidden_sizes_the_handout_promises_are_the_suites():
    """gpu_kernels' hidden GeLU draws every size from draw_shape's default range, its matmul M, N, K from
    draw_matmul's: the handout says those ranges."""
    from autograder.suites.gpu_kernels import conftest
    from autograder.suites.gpu_kernels import test_hidden_kernels as hidden

    low, high = inspect.signature(conftest.draw_shape).parameters["sizes"].default
    ranks = inspect.signature(conftest.draw_shape).parameters["ranks"].default
    assert says("gpu_kernels", f"GeLU at shapes of rank {min(ranks)} to {max(ranks)} with every size from {low} to {high}")
    low, high = inspect.signature(hidden.draw_matmul).parameters["sizes"].default
    assert says("gpu_kernels", f"random M, N, K from {low} to {high}")


@pytest.mark.parametrize("text, cases, each, marks", [
    ("| `test_a[...]` (GPU, edge) | 3 × 2 | x |", 3, 2.0, {"GPU", "edge"}),
    ("| `test_b` | 0.5 | x |", 1, 0.5, set()),
    ("| `test_c` (edge) | 13 × 0.5 | x |", 13, 0.5, {"edge"}),
])
def test_a_table_row_is_read_as_cases_points_and_marks(text, cases, each, marks):
    assert table_rows(text) == [(text.split("`")[1].split("[")[0], marks, cases, each)]


def test_a_points_cell_in_another_form_is_an_error_that_says_how_to_write_it():
    with pytest.raises(AssertionError, match="n × p for n cases of p points each"):
        table_rows("| `test_d` | 0.5 x 9 | x |")
