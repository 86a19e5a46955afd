"""No numeric key of a written question shows in the students' handout.

A question's key lives in the reference handout's solution block, which `make assignments` strips. What
stays (the question, its rubric, the worked examples of other sections) must not state the key: a rubric
that says "448 overflows" hands out T11.a. Each key of three significant digits or more is looked for in
assignments/<name>/README.md as the handout would write it (as typed, or with thousands separators);
fewer digits (2, 0.5) occur everywhere and say nothing. A number that is the key by design of the
question's data, not by a slip, is listed below with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = ("resource_accounting", "flash_attention", "gpu_kernels")
# (assignment, key): why the number may stand in the students' handout.
KNOWN = {
    ("gpu_kernels", "T4.c"): "1024 is a power of two the handout uses everywhere (blocks, sizes)",
    ("gpu_kernels", "T10.e"): "4864 is the end of the staff's sweep, which the question must state",
    ("resource_accounting", "Q6.1.b"): "2048 is a sequence length the handout uses elsewhere",
}


def keys(name: str) -> list[tuple[str, str]]:
    text = (ROOT / "solutions" / name / "README.md").read_text()
    return re.findall(r"^((?:T|Q|W)[\d.]+[a-z]) = (\S+)$", text, re.M)


def forms(value: str) -> set[str]:
    number = float(value)
    found = {value}
    if number == int(number):
        found.add(f"{int(number):,}")
    return found


def significant(value: str) -> int:
    return len(value.replace("-", "").replace(".", "").strip("0"))


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_no_key_is_stated_in_the_students_handout(name):
    stub = (ROOT / "assignments" / name / "README.md").read_text()
    found = keys(name)
    assert found, f"solutions/{name}/README.md has no keys to look for"
    stated = []
    for key, value in found:
        try:
            float(value)
        except ValueError:
            continue
        if significant(value) < 3 or (name, key) in KNOWN:
            continue
        for form in forms(value):
            if re.search(r"(?<![\d.,])" + re.escape(form) + r"(?![\d,]|\.\d)", stub):
                stated.append(f"{key} = {value} (as {form!r})")
    assert not stated, f"assignments/{name}/README.md states keys: {stated}"


def test_the_known_exceptions_are_still_keys_and_still_stated():
    """An exception that no longer applies is removed, so that the list says only what is true."""
    for (name, key), why in KNOWN.items():
        value = dict(keys(name)).get(key)
        assert value is not None, f"{name} {key} is no longer a key: remove it from KNOWN"
        stub = (ROOT / "assignments" / name / "README.md").read_text()
        assert any(form in stub for form in forms(value)), f"{name} {key} is no longer stated: remove it ({why})"


def test_a_key_slipped_into_a_rubric_is_found(tmp_path, monkeypatch):
    """The check itself: a students' handout whose rubric states a key fails it."""
    for name in ASSIGNMENTS:
        (tmp_path / "solutions" / name).mkdir(parents=True)
        (tmp_path / "assignments" / name).mkdir(parents=True)
        (tmp_path / "solutions" / name / "README.md").write_text("### BEGIN SOLUTION\nT1.a = 57344\n### END SOLUTION\n")
        (tmp_path / "assignments" / name / "README.md").write_text("- *(0.5)* e5m2 reaches 57,344.\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    with pytest.raises(AssertionError, match="T1.a = 57344"):
        test_no_key_is_stated_in_the_students_handout("gpu_kernels")
