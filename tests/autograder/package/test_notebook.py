"""A notebook back as the package layout: the %%writefile rule, its edge cases, the IPython scan, and
open_submission's notebook branch (what the trusted grader does with a notebook submission)."""

import nbformat
import pytest

from autograder.grading.notebook import NotebookError, read_modules
from autograder.package.notebook import module_order
from autograder.grading.intake import open_submission

PACKAGES = ["flash_attention", "resource_accounting"]


def notebook(*sources: str) -> bytes:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s, id=f"c{i}") for i, s in enumerate(sources)])
    return nbformat.writes(nb).encode()


def test_each_writefile_cell_gives_its_module_and_the_package_gets_an_init():
    files, problems = read_modules(notebook("x = 1", "%%writefile resource_accounting/memory.py\nA = 1",
                                            "%%writefile ./resource_accounting/flops.py\nB = 2\n"), PACKAGES)
    assert files == {"resource_accounting/memory.py": b"A = 1\n", "resource_accounting/flops.py": b"B = 2\n",
                     "resource_accounting/__init__.py": b""}
    assert problems == []


def test_what_ipython_also_runs_as_writefile_is_read_as_it_does():
    """%%file is IPython's alias of %%writefile, and IPython drops a cell's leading blank lines before it looks
    for a cell magic: such cells write their modules in the kernel, so they are graded as written."""
    files, problems = read_modules(notebook("%%file resource_accounting/memory.py\nA = 1",
                                            "\n  \n%%writefile resource_accounting/flops.py\nB = 2\n",
                                            "%%filex resource_accounting/network.py\nC = 3\n"), PACKAGES)
    assert files == {"resource_accounting/memory.py": b"A = 1\n", "resource_accounting/flops.py": b"B = 2\n",
                     "resource_accounting/__init__.py": b""}
    assert problems == []


def test_a_later_cell_replaces_an_earlier_one_and_append_appends_as_in_the_kernel():
    files, problems = read_modules(notebook("%%writefile resource_accounting/memory.py\nA = 1",
                                            "%%writefile resource_accounting/memory.py\nA = 2",
                                            "%%writefile -a resource_accounting/memory.py\nB = 3"), PACKAGES)
    assert files["resource_accounting/memory.py"] == b"A = 2\nB = 3\n"
    assert problems == ["resource_accounting/memory.py is written by cells 1, 2, 3: the last one is graded, "
                        "as when the notebook runs from top to bottom"]


@pytest.mark.parametrize("target", ["../evil.py", "/etc/passwd", "resource_accounting/sub/x.py",
                                    "other/x.py", "resource_accounting/notes.txt", "resource_accounting/a-b.py", ""])
def test_a_cell_that_writes_anything_but_a_module_of_the_packages_is_not_graded(target):
    files, problems = read_modules(notebook(f"%%writefile {target}\nX = 1"), PACKAGES)
    assert files == {} and len(problems) == 1 and "not graded" in problems[0]


@pytest.mark.parametrize("code, found", [
    ("get_ipython().input_transformers_post.append(f)", "input_transformers_post"),
    ("import IPython\nIPython.get_ipython().set_custom_exc((Exception,), h)", "set_custom_exc"),
    ("sh = get_ipython(); sh.showtraceback = lambda *a, **k: None", "showtraceback"),
    ("shell.events.register('pre_run_cell', f)", "events.register"),
    ("import sys\nsys.excepthook = print", "excepthook"),
    ("%load_ext cheat", "%load_ext"),
])
def test_cells_touching_ipythons_machinery_are_flagged(code, found):
    _, problems = read_modules(notebook("x = 1", code), PACKAGES)
    assert len(problems) == 1 and problems[0].startswith("cell 2 touches IPython's machinery") and found in problems[0]


def test_ordinary_code_is_not_flagged():
    _, problems = read_modules(notebook("%%writefile resource_accounting/memory.py\nimport torch\n"
                                        "class Log:\n    def __init__(self):\n        self.events = []\n"), PACKAGES)
    assert problems == []


@pytest.mark.parametrize("data", [b"not json", b"{}", b'{"cells": 3, "nbformat": 4, "nbformat_minor": 5, "metadata": {}}'])
def test_an_unreadable_notebook_raises_notebook_error(data):
    with pytest.raises(NotebookError):
        read_modules(data, PACKAGES)


def test_open_submission_turns_a_notebook_into_the_package_layout(tmp_path):
    source = tmp_path / "alice.ipynb"
    source.write_bytes(notebook("%%writefile resource_accounting/memory.py\nA = 1",
                                "get_ipython().set_custom_exc((Exception,), None)"))
    sub = open_submission(source, tmp_path / "stage", PACKAGES)
    assert sub.packages == ["resource_accounting"]
    assert (sub.root / "resource_accounting" / "memory.py").read_text() == "A = 1\n"
    assert (sub.root / "resource_accounting" / "__init__.py").read_text() == ""
    assert len(sub.problems) == 1 and "set_custom_exc" in sub.problems[0]


@pytest.mark.parametrize("data, says", [(b"nope", "is not a readable notebook"),
                                        (notebook("x = 1"), "has no module cells")])
def test_open_submission_refuses_a_notebook_it_cannot_grade(tmp_path, data, says):
    source = tmp_path / "bob.ipynb"
    source.write_bytes(data)
    sub = open_submission(source, tmp_path / "stage", PACKAGES)
    assert sub.packages == [] and len(sub.problems) == 1 and says in sub.problems[0]


def test_modules_come_in_the_order_the_handout_names_them():
    assert module_order("resource_accounting") == ["memory", "einops_ops", "flops", "network", "training"]
