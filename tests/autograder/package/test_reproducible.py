"""The same input gives the same output: every channel built a second time, elsewhere, is byte for byte
the same (nbgrader's gradebook.db aside: a database of timestamps, not a deliverable)."""

import json

from autograder.package import classroom, gradescope, nbgrader, release
from autograder.package.layout import tree_files


def build_again(packaged, dest):
    release.build(dest / "student")
    gradescope.build(dest / "gradescope")
    nbgrader.build(dest / "nbgrader", packaged.tests)
    classroom.build(dest / "classroom", packaged.tests)


def test_every_channel_builds_to_the_same_bytes_twice(packaged, tmp_path):
    build_again(packaged, tmp_path)  # elsewhere, later, from the same collection as the session's dist/
    for channel in ("student", "gradescope", "nbgrader", "classroom"):
        first, second = packaged.dist / channel, tmp_path / channel
        files = [f for f in tree_files(first) if f != "gradebook.db"]
        assert files == [f for f in tree_files(second) if f != "gradebook.db"], channel
        changed = [f for f in files if (first / f).read_bytes() != (second / f).read_bytes()]
        assert changed == [], f"{channel}: {changed}"


def test_notebook_cells_have_fixed_ids(packaged):
    for notebook in sorted((packaged.dist / "nbgrader").glob("*/*/*.ipynb")):
        ids = [cell["id"] for cell in json.loads(notebook.read_text())["cells"]]
        assert len(ids) == len(set(ids)) and "setup" in ids and "intro" in ids, notebook
