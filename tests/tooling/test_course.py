"""One numbering of the assignments everywhere: kernels/course.py's table.

The table holds the assignments in teaching order with their numbers and titles. Each handout's title is
"# Assignment N: <title>" from it; wherever a handout (solutions/ and assignments/), a public test
package's docstring (tests/<A>/__init__.py) or the given tooling (kernels/, its plot titles included)
names an assignment by its number, the name written beside it must be that number's assignment; "the next
assignment" must point at the one after; and every "§N" a handout cites is a heading of the handout it
means (its own, or the one of the assignment named just before it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernels import course

ROOT = Path(__file__).resolve().parents[2]
# How prose names each assignment besides its package and its title.
ALIASES = {"resource_accounting": ("resource accounting",), "gpu_kernels": ("GPU kernels",),
           "flash_attention": ("FlashAttention",)}
NUMBERED = re.compile(r"\b[Aa]ssignment (\d+)\b")
RELATIVE = re.compile(r"\bthe (next|previous) assignment\b")
WINDOW = 80  # characters either side of a mention in which its name must be written


def names() -> dict[str, str]:
    """Every way of writing an assignment's name -> its package."""
    found = {}
    for assignment in course.ASSIGNMENTS:
        for name in (assignment.package, assignment.title, *ALIASES[assignment.package]):
            found[name] = assignment.package
    return found


def named_near(text: str, start: int, end: int) -> str | None:
    """The package of the assignment name written nearest to text[start:end], within WINDOW characters."""
    best = None
    for name, package in names().items():
        for found in re.finditer(re.escape(name), text[max(0, start - WINDOW): end + WINDOW], re.IGNORECASE):
            where = found.start() + max(0, start - WINDOW)
            distance = start - (where + len(name)) if where < start else where - end
            if best is None or distance < best[0]:
                best = (distance, package)
    return best[1] if best else None


def mistakes(text: str, package: str | None) -> list[str]:
    """What a text says about the assignments' numbers that disagrees with the table. `package`: the assignment
    the text belongs to (None for tooling), for "the next assignment"."""
    found = []
    for mention in NUMBERED.finditer(text):
        number, near = int(mention.group(1)), named_near(text, mention.start(), mention.end())
        known = {a.number: a.package for a in course.ASSIGNMENTS}
        if number not in known:
            found.append(f"{mention.group(0)!r}: the course has no such assignment")
        elif near is None:
            found.append(f"{mention.group(0)!r} with no assignment named beside it: "
                         f"...{text[max(0, mention.start() - 40): mention.end() + 40]!r}...")
        elif known[number] != near:
            found.append(f"{mention.group(0)!r} beside {near}, which is Assignment {course.number(near)}")
    for mention in RELATIVE.finditer(text):
        step = 1 if mention.group(1) == "next" else -1
        near = named_near(text, mention.start(), mention.end())
        expected = course.number(package) + step if package else None
        if near is None or expected is None or course.number(near) != expected:
            found.append(f"{mention.group(0)!r} beside {near}: the {mention.group(1)} assignment after "
                         f"{package} is number {expected}")
    if len(course.ASSIGNMENTS) != 2 and re.search(r"\bboth assignments\b", text):
        found.append(f"'both assignments': the course has {len(course.ASSIGNMENTS)}")
    return found


def handouts() -> list[tuple[Path, str]]:
    return [(ROOT / tree / package / "README.md", package) for tree in ("solutions", "assignments")
            for package in course.packages()]


def texts() -> list[tuple[str, str, str | None]]:
    """(where, text, its assignment) for every text whose mentions are checked."""
    found = [(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"), package)
             for path, package in handouts()]
    found += [(f"tests/{package}/__init__.py", (ROOT / "tests" / package / "__init__.py").read_text(encoding="utf-8"),
               package) for package in course.packages()]
    found += [(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"), None)
              for path in sorted((ROOT / "kernels").rglob("*.py"))]
    return found


def test_the_table_lists_the_repositorys_assignments_numbered_in_order():
    packages = {p.parent.name for p in (ROOT / "solutions").glob("*/__init__.py")}
    assert set(course.packages()) == packages == {p.parent.name for p in (ROOT / "tests").glob("*/conftest.py")}
    assert [a.number for a in course.ASSIGNMENTS] == list(range(1, len(course.ASSIGNMENTS) + 1))


@pytest.mark.parametrize("path, package", handouts(), ids=lambda v: v.relative_to(ROOT).as_posix()
                         if isinstance(v, Path) else "")
def test_each_handouts_title_has_its_number_and_title_from_the_table(path, package):
    assert path.read_text(encoding="utf-8").splitlines()[0] == course.heading(package)


@pytest.mark.parametrize("where, text, package", texts(), ids=[w for w, _, _ in texts()])
def test_an_assignment_named_by_number_is_that_number_in_the_table(where, text, package):
    found = mistakes(text, package)
    assert not found, f"{where}:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("text, package, problem", [
    ("# Assignment 3: GPU kernels in Triton", "gpu_kernels", "'Assignment 3' beside gpu_kernels"),
    ("As in Assignment 2 (`gpu_kernels`).", "flash_attention", None),
    ("Assignment 3 (`gpu_kernels`, its handout §3) met it.", "flash_attention", "which is Assignment 2"),
    ("see the next assignment's handout, FlashAttention's.", "resource_accounting", "is number 2"),
    ("FlashAttention (the next assignment) builds on it.", "gpu_kernels", None),
    ("A multiply and an add, as in Assignment 1.", "gpu_kernels", "no assignment named beside it"),
    ("the public tests of both assignments", "resource_accounting", "'both assignments'"),
    ("Assignment 7 (gpu_kernels)", None, "no such assignment"),
])
def test_the_check_finds_a_wrong_number(text, package, problem):
    found = mistakes(text, package)
    assert (problem is None and not found) or (problem and any(problem in f for f in found)), found


def headings(package: str) -> set[str]:
    text = (ROOT / "solutions" / package / "README.md").read_text(encoding="utf-8")
    return set(re.findall(r"^#{2,3} (§[\dA]+(?:\.\d+)?) ", text, re.M))


@pytest.mark.parametrize("path, package", handouts(), ids=lambda v: v.relative_to(ROOT).as_posix()
                         if isinstance(v, Path) else "")
def test_every_section_a_handout_cites_is_a_heading_of_the_handout_it_means(path, package):
    """"§5" is the handout's own §5, unless an assignment is named just before it ("Assignment 2
    (`gpu_kernels`, its handout §3)"): then it is that assignment's."""
    text = path.read_text(encoding="utf-8")
    wrong = []
    for cited in re.finditer(r"§([\dA]+(?:\.\d+)?)", text):
        before = text[max(0, cited.start() - 40): cited.start()]
        other = next((p for name, p in names().items() if name != course.title(package) and p != package
                      and re.search(re.escape(name), before, re.IGNORECASE)), None)
        if cited.group(0) not in headings(other or package):
            wrong.append(f"{cited.group(0)} of {other or package}: ...{text[cited.start() - 50: cited.end()]!r}")
    assert not wrong, "sections that are not headings:\n  " + "\n  ".join(wrong)
