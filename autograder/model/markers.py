"""nbgrader's marker syntax for plain files: find and replace solution and hidden-test regions.

    ### BEGIN SOLUTION          ### BEGIN HIDDEN TESTS
    ...reference code...        ...tests students never see...
    ### END SOLUTION            ### END HIDDEN TESTS

A marker is any line containing `### BEGIN SOLUTION` (and so on), as in nbgrader's ClearSolutions,
and the replacement takes the marker line's indentation. Unlike nbgrader (which ignores a stray END), every imbalance is an error
naming the file and the line, because a region silently left in would ship a solution to students.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

DELIMITERS = {
    "solution": ("BEGIN SOLUTION", "END SOLUTION"),
    "hidden": ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS"),
}

# What a text file's solution region (a handout's model answer, say) becomes in the students' copy.
TEXT_STUB = ["*Your answer here.*"]


class MarkerError(ValueError):
    """Unbalanced or nested markers: `path:line: what is wrong`."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.path, self.line, self.problem = path, line, problem


@dataclass(frozen=True)
class Region:
    kind: str  # "solution" or "hidden"
    begin: int  # 1-based line of the BEGIN marker
    end: int  # 1-based line of the END marker
    indent: str


def _marker(line: str) -> tuple[str, str] | None:
    """("begin"|"end", kind) when the line is a marker line."""
    for kind, (begin, end) in DELIMITERS.items():
        if re.search(rf"###\s*{begin}\b", line):
            return "begin", kind
        if re.search(rf"###\s*{end}\b", line):
            return "end", kind
    return None


def find_regions(text: str, path: str) -> list[Region]:
    """All marked regions of a file, in order; MarkerError on any imbalance or nesting."""
    regions: list[Region] = []
    open_kind, open_line, open_indent = None, 0, ""
    for number, line in enumerate(text.splitlines(), start=1):
        found = _marker(line)
        if found is None:
            continue
        edge, kind = found
        if edge == "begin":
            if open_kind is not None:
                raise MarkerError(path, number, f"nested BEGIN inside the {open_kind} region opened at line {open_line}")
            open_kind, open_line, open_indent = kind, number, re.match(r"\s*", line).group(0)
        elif open_kind is None:
            raise MarkerError(path, number, f"END {DELIMITERS[kind][0][6:]} without a matching BEGIN")
        elif kind != open_kind:
            raise MarkerError(path, number, f"END of a {kind} region closes the {open_kind} region opened at line {open_line}")
        else:
            regions.append(Region(kind, open_line, number, open_indent))
            open_kind = None
    if open_kind is not None:
        raise MarkerError(path, open_line, f"BEGIN of a {open_kind} region is never closed")
    return regions


def replace_regions(text: str, path: str, stub: Callable[[Region], list[str]]) -> str:
    """Replace each solution region by `stub(region)` (lines, unindented) and drop hidden regions."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    cursor = 0
    for region in find_regions(text, path):
        out.extend(lines[cursor : region.begin - 1])
        if region.kind == "solution":
            out.extend(f"{region.indent}{s}\n" if s else "\n" for s in stub(region))
        cursor = region.end
    out.extend(lines[cursor:])
    return "".join(out)
