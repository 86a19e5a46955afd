"""The tests of the assignments as data: node id, group, points and markers, as pytest collects them.

    tests = collect(["resource_accounting"])        # [CollectedTest, ...], public then hidden
    python -m autograder.package.collect tests/resource_accounting --out tests.json

The nbgrader notebook puts points on its test cells and the GitHub Classroom workflow on its steps;
both take them from here. pytest collects in a fresh interpreter with the reference solutions as the
implementation tree, the collection the grader itself makes, so these are the points it awards. A
test's group is its file's name without `test_` and `hidden_`: tests/resource_accounting/test_memory.py
and autograder/suites/resource_accounting/test_hidden_memory.py both hold group `memory`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from autograder.package.layout import ROOT


def group_of(test: str) -> str:
    """The group of a test file or node id: `.../test_hidden_memory.py::test_x` -> `memory`."""
    return Path(test.split("::")[0]).stem.removeprefix("test_").removeprefix("hidden_")


@dataclass(frozen=True)
class CollectedTest:
    nodeid: str
    assignment: str
    path: str  # the test file, relative to the repository
    points: float
    visibility: str
    gpu: bool  # needs a CUDA device
    reference: bool  # compares with the reference solution (the `reference` fixture)

    @property
    def group(self) -> str:
        return group_of(self.path)

    @property
    def public(self) -> bool:
        return self.path.startswith("tests/")


class CollectionError(Exception):
    """pytest could not collect the tests; the message holds its output."""


def collect(assignments: list[str], hidden: bool = True) -> list[CollectedTest]:
    """The public tests (and hidden suites, unless hidden=False) of the assignments, in collection order."""
    paths = []
    for name in assignments:
        wanted = (f"tests/{name}", f"autograder/suites/{name}") if hidden else (f"tests/{name}",)
        paths += [p for p in wanted if (ROOT / p).is_dir()]
    with tempfile.TemporaryDirectory(prefix="llmsys-collect-") as tmp:
        out = Path(tmp) / "tests.json"
        done = subprocess.run([sys.executable, "-m", "autograder.package.collect", *paths, "--out", str(out)],
                              cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0 or not out.exists():
            raise CollectionError(f"collecting {' '.join(paths)} failed (exit {done.returncode}):\n"
                                  f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
        return [CollectedTest(**row) for row in json.loads(out.read_text())]


class _Recorder:
    """A pytest plugin that keeps what collection found, after the harness checked every test's points."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        from autograder.harness.plugin import assignment_of, points_of

        for item in items:
            visibility = item.get_closest_marker("visibility")
            self.rows.append(asdict(CollectedTest(
                nodeid=item.nodeid, assignment=assignment_of(item),
                path=Path(item.path).resolve().relative_to(ROOT).as_posix(),
                points=points_of(item) or 0.0, visibility=visibility.args[0] if visibility else "visible",
                gpu=item.get_closest_marker("gpu") is not None,
                reference="reference" in getattr(item, "fixturenames", ()))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    recorder = _Recorder()
    code = pytest.main(["--collect-only", "-q", "--impl", "solutions", "-p", "no:cacheprovider", *args.paths],
                       plugins=[recorder])
    if code != 0:
        return int(code)
    args.out.write_text(json.dumps(recorder.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
