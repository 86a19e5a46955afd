"""The course: its assignments in the order they are taught, each with its number and title.

    from kernels.course import ASSIGNMENTS, number, title
    number("gpu_kernels")     # 2
    title("gpu_kernels")      # "GPU kernels in Triton, their costs and their measurement"

The one place the order lives. Each handout's title says "# Assignment N: <title>" with these, a
plot that names an assignment takes its number from here, and the student's points table lists the
assignments in this order; tests/tooling/test_course.py holds the handouts, the public tests'
docstrings and the plots to it.
"""

from __future__ import annotations

from typing import NamedTuple


class Assignment(NamedTuple):
    number: int
    package: str  # the folder under solutions/, assignments/ and tests/
    title: str


ASSIGNMENTS: tuple[Assignment, ...] = (
    Assignment(1, "resource_accounting", "Resource accounting"),
    Assignment(2, "gpu_kernels", "GPU kernels in Triton, their costs and their measurement"),
    Assignment(3, "flash_attention", "FlashAttention-2 in PyTorch and Triton"),
)


def _find(package: str) -> Assignment:
    for assignment in ASSIGNMENTS:
        if assignment.package == package:
            return assignment
    raise KeyError(f"{package!r} is not an assignment of the course (kernels/course.py lists "
                   f"{', '.join(a.package for a in ASSIGNMENTS)})")


def number(package: str) -> int:
    """The assignment's number in course order (1 for the first)."""
    return _find(package).number


def title(package: str) -> str:
    return _find(package).title


def heading(package: str) -> str:
    """The handout's first line: "# Assignment 2: GPU kernels in Triton, ..."."""
    return f"# Assignment {number(package)}: {title(package)}"


def packages() -> list[str]:
    """The assignments' packages, in course order."""
    return [assignment.package for assignment in ASSIGNMENTS]
