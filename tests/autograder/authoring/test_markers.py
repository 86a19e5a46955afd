"""The marker parser: nbgrader's syntax, strict about balance, and identical to nbgrader on cells."""

import pytest

from autograder.model.markers import MarkerError, find_regions, replace_regions

SOURCE = """def f(x):
    y = x + 1
    ### BEGIN SOLUTION
    return y * 2
    ### END SOLUTION

### BEGIN HIDDEN TESTS
assert f(1) == 4
### END HIDDEN TESTS
"""


def test_regions_are_found_with_lines_and_indent():
    regions = find_regions(SOURCE, "f.py")
    assert [(r.kind, r.begin, r.end, r.indent) for r in regions] == [
        ("solution", 3, 5, "    "),
        ("hidden", 7, 9, ""),
    ]


def test_solution_region_is_replaced_at_its_indent_and_hidden_region_dropped():
    out = replace_regions(SOURCE, "f.py", lambda region: ["raise NotImplementedError()"])
    assert out == "def f(x):\n    y = x + 1\n    raise NotImplementedError()\n\n"


@pytest.mark.parametrize(
    "text, line, problem",
    [
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", 2, "nested BEGIN"),
        ("x = 1\n### END SOLUTION\n", 2, "without a matching BEGIN"),
        ("x = 1\n\n### BEGIN SOLUTION\nx = 2\n", 3, "never closed"),
        ("### BEGIN SOLUTION\n### END HIDDEN TESTS\n", 2, "closes the solution region"),
        ("### BEGIN HIDDEN TESTS\n### BEGIN SOLUTION\n", 2, "nested BEGIN"),
    ],
)
def test_unbalanced_or_nested_markers_name_file_and_line(text, line, problem):
    with pytest.raises(MarkerError) as info:
        find_regions(text, "pkg/mod.py")
    assert info.value.line == line
    assert str(info.value).startswith(f"pkg/mod.py:{line}: ")
    assert problem in str(info.value)


def test_same_output_as_nbgrader_clear_solutions_on_a_code_cell():
    nbformat = pytest.importorskip("nbformat")
    clearsolutions = pytest.importorskip("nbgrader.preprocessors.clearsolutions")
    text = SOURCE.split("### BEGIN HIDDEN")[0]
    cell = nbformat.v4.new_code_cell(text)
    clearsolutions.ClearSolutions()._replace_solution_region(cell, "python")
    stub = clearsolutions.ClearSolutions().code_stub["python"].split("\n")
    ours = replace_regions(text, "f.py", lambda region: stub)
    assert ours == cell.source
