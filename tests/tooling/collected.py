"""The tests of the assignments as pytest collects them, with the markers the handouts state.

    tests = collected()     # [Collected(nodeid, assignment, public, points, edge, gpu), ...]

Collected once per test session, in a fresh interpreter with the reference solutions as the implementation
tree (the collection the grader makes), from every assignment's public tests and hidden suite. The handouts'
point figures and test tables are checked against these (tests/tooling/test_handout_points.py).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from kernels.course import packages

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Collected:
    nodeid: str
    assignment: str
    public: bool  # in tests/<A>/, not in the hidden suite
    points: float
    edge: bool
    gpu: bool
    opaque: bool = False  # a parametrized case pytest could only name by its index (`config0`)

    @property
    def function(self) -> str:
        """The test function's name, without the file and the parameters."""
        return self.nodeid.split("::")[-1].split("[")[0]


@functools.cache
def collected() -> tuple[Collected, ...]:
    paths = [p for name in packages() for p in (f"tests/{name}", f"autograder/suites/{name}")]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "collected.json"
        done = subprocess.run([sys.executable, "-m", "tests.tooling.collected", str(out), *paths], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
        return tuple(Collected(**row) for row in json.loads(out.read_text()))


class _Recorder:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        from autograder.harness.plugin import assignment_of, points_of

        for item in items:
            self.rows.append(asdict(Collected(
                nodeid=item.nodeid, assignment=assignment_of(item), public=item.nodeid.startswith("tests/"),
                points=points_of(item) or 0.0, edge=item.get_closest_marker("edge") is not None,
                gpu=item.get_closest_marker("gpu") is not None, opaque=_opaque(item))))


def _opaque(item: pytest.Item) -> bool:
    """Whether pytest named one of the item's parameters by its index (`config0`: a value it cannot print)."""
    spec = getattr(item, "callspec", None)
    return spec is not None and any(re.search(rf"(^|-){re.escape(name)}[0-9]+(-|$)", spec.id) for name in spec.params)


if __name__ == "__main__":
    recorder = _Recorder()
    code = pytest.main(["--collect-only", "-q", "--impl", "solutions", "-p", "no:cacheprovider", *sys.argv[2:]],
                       plugins=[recorder])
    Path(sys.argv[1]).write_text(json.dumps(recorder.rows))
    sys.exit(int(code))
