"""An assignment as a notebook: the writers' side (a submitted notebook is read by autograder.grading.notebook).

How a notebook maps to the package (the same rule both ways, and the rule the kernel itself follows):
- A given setup cell creates the package folder `<assignment>/` and its (empty) `__init__.py`.
- Each module `<assignment>/<module>.py` is one code cell whose first line is
  `%%writefile <assignment>/<module>.py`, followed by the module's code with its solution regions.
  Running the cell saves it as that file (IPython's own magic); nbgrader's metadata makes it a solution
  cell and `llmsys.module` names the file. Modules come in the order the handout first names them.
- After the module cells, a graded test cell per group of tests (see collect.py), in module order: it runs
  the group's public tests on the saved package and, in its hidden part, the group's hidden suite, and
  ends with the points earned, which nbgrader takes as the cell's partial credit. Its points are those
  of the tests it runs: the tests needing a GPU or the reference solution run only in the trusted
  grader. `llmsys.group` names the group, so the trusted grader can score the cell too.
- One graded cell (0 points) holds, in its hidden part, the hidden suite's files for the test cells.
- The handout comes first, one markdown cell per section. Each written question of the handout's format
  (autograder/written/answers.py) gets one answer cell, id `answer-<ID>` (`answer-Q6_1` for Q6.1: a cell id may
  not hold a dot), its template the question's section of answers.md (a line `<ID>.<letter> =` per
  numeric part, then `Answer:`), its solution region the model answer; nbgrader grades it by hand for
  the rubric's points. Any other solution region of the handout stays a 0-point answer cell.

Reading a submitted notebook back is the trusted side's: autograder/grading/notebook.py.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat

from autograder.written import answers as written
from autograder.model.markers import find_regions
from autograder.package.collect import CollectedTest
from autograder.package.layout import ROOT, files_of
from autograder.package.notebook_tests import counted
from autograder.grading.notebook import NotebookError

SOLUTIONS = ROOT / "solutions"
METADATA = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}}
NBGRADER_DELIMITERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
                       "BEGIN MARK SCHEME", "END MARK SCHEME")
HIDDEN_VARIABLE = "HIDDEN_TESTS"
# ---- building the source notebook -------------------------------------------------------------------

def _nbgrader(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False,
              points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _code(cell_id: str, source: str, metadata: dict | None = None) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source, id=cell_id, metadata=metadata or {})


def _markdown(cell_id: str, source: str, metadata: dict | None = None) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(source, id=cell_id, metadata=metadata or {})


def _points(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def module_order(assignment: str) -> list[str]:
    """The package's modules in the order the handout first names them (`memory.py`), the rest sorted."""
    names = sorted(p.stem for p in (SOLUTIONS / assignment).glob("*.py") if p.name != "__init__.py")
    handout = (SOLUTIONS / assignment / "README.md").read_text(encoding="utf-8")
    first = {name: handout.find(f"`{name}.py`") for name in names}
    return sorted(names, key=lambda name: (first[name] < 0, first[name], name))


def intro_cell(assignment: str) -> nbformat.NotebookNode:
    return _markdown("intro", f"""# {assignment}: the notebook edition

This notebook is the whole assignment: the handout below, then one code cell per file of the
`{assignment}` package, then a test cell per file.

- **Run the setup cell first**: it creates the package folder `{assignment}/`.
- **Write your code in the module cells**, the ones that start with `%%writefile {assignment}/<module>.py`:
  replace each `raise NotImplementedError()` under `# YOUR CODE HERE`. Running a module cell saves it
  as that file (it defines nothing in the notebook itself); run it again after every change. Keep its
  first line as it is: the grader takes each module from the cell that writes it.
- **Run a test cell** to run the public tests of its file on the saved package: it prints what failed
  and ends with the public points earned. When the notebook is graded, hidden tests of the same
  properties run too and count in the same cell. (The handout's `make test` is for the repository
  edition; in a terminal in this folder, `python -m pytest tests/{assignment}` runs all the tests.)
- **Answer the written questions** in their answer cells: a number after each `<ID>.<letter> =` line
  (a unit after it is fine), your reasoning in place of "YOUR ANSWER HERE" below `Answer:`. The numbers
  are graded automatically with the handout's tolerance, the reasoning by hand.""")


def _sections(text: str) -> list[str]:
    """Markdown split before each `## ` heading that is not inside a code fence."""
    sections: list[list[str]] = [[]]
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if line.startswith("## ") and not fenced and any(s.strip() for s in sections[-1]):
            sections.append([])
        sections[-1].append(line)
    return ["\n".join(s).strip("\n") for s in sections if any(line.strip() for line in s)]


def handout_cells(assignment: str) -> list[nbformat.NotebookNode]:
    """The handout: a markdown cell per section, each written answer a manually graded answer cell."""
    path = SOLUTIONS / assignment / "README.md"
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    questions = {q.solution_line: q for q in written.parse_handout(text, f"{assignment}/README.md")}
    chunks, cursor = [], 0
    for region in find_regions(text, str(path.relative_to(ROOT))):
        chunks.append(("text", "\n".join(lines[cursor: region.begin - 1]), None))
        if region.kind == "solution":
            chunks.append(("answer", "\n".join(lines[region.begin - 1: region.end]), questions.get(region.begin)))
        cursor = region.end
    chunks.append(("text", "\n".join(lines[cursor:]), None))
    cells, answers = [], 0
    for kind, chunk, question in chunks:
        if kind == "answer" and question is not None:
            cells.append(answer_cell(assignment, question, chunk))
            continue
        if kind == "answer":
            answers += 1
            cells.append(_markdown(f"answer-{answers}", chunk,
                                   _nbgrader(f"answer_{answers}", grade=True, solution=True, points=0)))
            continue
        for section in _sections(chunk):
            cells.append(_markdown(f"handout-{len(cells) + 1}", section))
    return cells


def answer_cell(assignment: str, question: written.Question, solution: str) -> nbformat.NotebookNode:
    """A written question's answer cell: its answers.md template, then the model answer as a solution
    region (nbgrader's release replaces the region by "YOUR ANSWER HERE")."""
    template = written.cell_template(question)
    cell_id = written.cell_id(question.id)
    metadata = _nbgrader(cell_id.replace("-", "_"), grade=True, solution=True, points=question.rubric_points)
    metadata["llmsys"] = {"question": question.id, "assignment": assignment}
    return _markdown(cell_id, f"{template}\n\n{solution}" if template else solution, metadata)


def setup_cell(assignment: str) -> nbformat.NotebookNode:
    return _code("setup", f"""# Given: run this cell first. Each module cell below saves itself into this package folder.
from pathlib import Path

Path("{assignment}").mkdir(exist_ok=True)
Path("{assignment}/__init__.py").touch()""", _nbgrader("setup", locked=True))


def module_cell(assignment: str, module: str) -> nbformat.NotebookNode:
    rel = f"{assignment}/{module}.py"
    code = (SOLUTIONS / assignment / f"{module}.py").read_text(encoding="utf-8")
    if any(region.kind == "hidden" for region in find_regions(code, f"solutions/{rel}")):
        raise NotebookError(f"solutions/{rel} has a hidden-tests region: move hidden tests to "
                            f"autograder/suites/{assignment}/, a module cell cannot hold them")
    metadata = _nbgrader(f"{assignment}_{module}", solution=True) | {"llmsys": {"module": rel}}
    return _code(f"module-{module}", f"%%writefile {rel}\n{code.rstrip()}", metadata)


def hidden_suite_cell(assignment: str) -> nbformat.NotebookNode:
    """The hidden suite's files as one dict, all of it in a hidden region (its rules.py stays out)."""
    rels = ["autograder/suites/__init__.py"] + [rel for rel in files_of(f"autograder/suites/{assignment}")
                                                if rel.endswith(".py") and not rel.endswith("/rules.py")]
    entries = []
    for rel in rels:
        text = (ROOT / rel).read_text(encoding="utf-8")
        found = [d for d in NBGRADER_DELIMITERS if d in text]
        if found:
            raise NotebookError(f"{rel} contains nbgrader's marker {found[0]!r}: nbgrader would cut the "
                                "hidden cell there; reword that line")
        entries.append(f"    {json.dumps(rel)}: {json.dumps(text)},")  # JSON strings are Python literals
    source = "\n".join(["# The grader's hidden tests: empty in your copy, put back by nbgrader when it grades.",
                        "### BEGIN HIDDEN TESTS", f"{HIDDEN_VARIABLE} = {{", *entries, "}",
                        "### END HIDDEN TESTS"])
    return _code("hidden-tests", source, _nbgrader("hidden_tests", grade=True, locked=True, points=0))


def test_cell(group: str, tests: list[CollectedTest]) -> nbformat.NotebookNode:
    """The graded cell of one group: public tests, then (hidden) the group's hidden suite."""
    public = sorted({t.path for t in tests if t.public})
    hidden = sorted({t.path for t in tests if not t.public})
    shown = sum(t.points for t in tests if t.public)
    total = sum(t.points for t in tests)
    where = f"the public tests in {', '.join(public)}" if public else "no public tests"
    lines = [f"# Tests of {group}: {_points(shown)} points from {where} here, "
             f"{_points(total - shown)} more from hidden tests when graded.",
             "# It prints what failed and ends with the points earned.",
             "from autograder.package.notebook_tests import run_tests", "", "points = 0.0"]
    lines += [f"points += run_tests({path!r})" for path in public]
    if hidden:
        lines += ["### BEGIN HIDDEN TESTS",
                  *[f"points += run_tests({path!r}, files={HIDDEN_VARIABLE})" for path in hidden],
                  "### END HIDDEN TESTS"]
    lines.append("points")
    metadata = _nbgrader(f"test_{group}", grade=True, locked=True, points=total) | {"llmsys": {"group": group}}
    return _code(f"test-{group}", "\n".join(lines), metadata)


def build_notebook(assignment: str, tests: list[CollectedTest]) -> nbformat.NotebookNode:
    """The source notebook of an assignment, from its solutions and its collected tests."""
    mine = [t for t in tests if t.assignment == assignment and counted(t.gpu, t.reference)]
    groups: dict[str, list[CollectedTest]] = {}
    for test in mine:
        groups.setdefault(test.group, []).append(test)
    modules = module_order(assignment)
    cells = [intro_cell(assignment), *handout_cells(assignment), setup_cell(assignment)]
    if any(not t.public for t in mine):
        cells.append(hidden_suite_cell(assignment))
    cells += [module_cell(assignment, module) for module in modules]
    # The test cells come after all the module cells: one module's tests may use another module.
    order = [m for m in modules if m in groups] + sorted(set(groups) - set(modules))
    cells += [test_cell(group, groups[group]) for group in order]
    return nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(METADATA))


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """The notebook as its file's text: nbformat's own writer (sorted keys), one final newline."""
    return nbformat.writes(nb).rstrip("\n") + "\n"


def write_notebook(nb: nbformat.NotebookNode, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(notebook_text(nb), encoding="utf-8")
    path.chmod(0o644)
