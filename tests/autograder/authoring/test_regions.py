"""The handouts' generated regions: the static checks' rules, written from their definitions.

`make assignments` writes each region of a handout from autograder/suites/<A>/rules.py and
autograder/static/; `--check` (and so the sync test) fails when a handout's region differs from what
the rules give. These tests check the writer on small handouts, that the repository's handouts state every
name the rules hold, and that every handout section a rule's message points to exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autograder.authoring import regions, stubs
from autograder.model.markers import MarkerError
from autograder.static import flow, triton_rules
from autograder.static.checks import GRADER_RULE
from autograder.suites.flash_attention import rules as flash_rules
from autograder.suites.gpu_kernels import rules as kernel_rules
from autograder.suites.resource_accounting import rules as accounting_rules

ROOT = Path(__file__).resolve().parents[3]
RULES = {"resource_accounting": accounting_rules, "gpu_kernels": kernel_rules, "flash_attention": flash_rules}
HANDOUT = "# Title\n\nProse.\n\n<!-- BEGIN GENERATED: forbidden -->\n{inside}<!-- END GENERATED: forbidden -->\n\nMore.\n"


def handout(name: str) -> str:
    return (ROOT / "solutions" / name / "README.md").read_text(encoding="utf-8")


def region(text: str, kind: str) -> str:
    found = re.search(rf"<!-- BEGIN GENERATED: {kind} -->\n(.*?)<!-- END GENERATED: {kind} -->", text, re.S)
    assert found, f"no {kind} region"
    return found.group(1)


def test_fill_writes_the_region_from_the_rules_and_keeps_the_rest():
    filled = regions.fill(HANDOUT.format(inside="stale, edited by hand\n"), "resource_accounting", "x/README.md")
    assert "stale" not in filled and filled.startswith("# Title\n\nProse.\n") and filled.endswith("\n\nMore.\n")
    assert "| `flops.py` | `torch.utils.flop_counter`, `FlopCounterMode` |" in filled
    assert regions.fill(filled, "resource_accounting", "x/README.md") == filled


@pytest.mark.parametrize("text, problem", [
    ("<!-- BEGIN GENERATED: forbidden -->\n", "x.md:1: BEGIN GENERATED: forbidden without an END"),
    ("a\n<!-- END GENERATED: forbidden -->\n", "x.md:2: END GENERATED: forbidden without a BEGIN"),
    ("<!-- BEGIN GENERATED: forbidden -->\n<!-- END GENERATED: host-code -->\n",
     "x.md:2: END GENERATED: host-code closes the forbidden region of line 1"),
    ("<!-- BEGIN GENERATED: tables -->\n<!-- END GENERATED: tables -->\n", "x.md:1: unknown generated region 'tables'"),
    ("<!-- BEGIN GENERATED: host-code -->\n<!-- END GENERATED: host-code -->\n",
     "x.md:1: a host-code region needs TRITON_RULES"),
])
def test_a_broken_region_is_an_error_naming_the_file_and_line(text, problem):
    with pytest.raises(MarkerError) as raised:
        regions.fill(text, "resource_accounting", "x.md")
    assert str(raised.value).startswith(problem)


def test_check_reports_a_handout_whose_region_differs_from_the_rules(tmp_path):
    source = tmp_path / "solutions" / "resource_accounting"
    source.mkdir(parents=True)
    (source / "README.md").write_text(HANDOUT.format(inside=""))
    stubs.write_generated(tmp_path / "solutions")
    stubs.generate(tmp_path / "solutions", tmp_path / "assignments")
    assert stubs.check(tmp_path / "solutions", tmp_path / "assignments") == []
    text = (source / "README.md").read_text()
    (source / "README.md").write_text(text.replace("FlopCounter must count FLOPs itself", "anything goes"))
    assert stubs.check(tmp_path / "solutions", tmp_path / "assignments") == [str(source / "README.md")]
    stubs.write_generated(tmp_path / "solutions")
    assert "FlopCounter must count FLOPs itself" in (source / "README.md").read_text()


@pytest.mark.parametrize("name", sorted(RULES))
def test_the_handouts_forbidden_table_names_every_rule(name):
    table = region(handout(name), "forbidden")
    for rule in RULES[name].RULES + [GRADER_RULE]:
        for used in rule.forbidden + rule.required:
            assert f"`{used}`" in table, f"{name}: the forbidden table leaves out {used} ({rule.name})"


@pytest.mark.parametrize("name", ["gpu_kernels", "flash_attention"])
def test_the_handouts_host_code_region_names_everything_the_triton_rules_allow(name):
    text = region(handout(name), "host-code")
    for rule in RULES[name].TRITON_RULES:
        allowed = (rule.imports + rule.host_names + rule.number_names + rule.attributes + rule.builtins
                   + rule.number_builtins + flow.DUNDER_METHODS + triton_rules.KERNEL_NAMES
                   + triton_rules.PATCHERS + triton_rules.HIDDEN_CODE + triton_rules.HIDDEN_NAMES
                   + triton_rules.HIDDEN_ATTRIBUTES + tuple(rule.tensors) + tuple(p for ps in rule.tensors.values() for p in ps))
        missing = sorted({n for n in allowed if f"`{n}`" not in text} - {"__name__", "__qualname__", "__doc__"}
                         - set(triton_rules.DUNDER_ALLOWED))
        assert not missing, f"{name}: the host-code region leaves out {missing}"


def headings(text: str) -> dict[str, str]:
    """§N (or §A.n) -> its title, for every numbered heading of a handout."""
    return dict(re.findall(r"^#{2,3} (§[\dA]+(?:\.\d+)?) (.+)$", text, re.M))


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_section_a_rule_points_to_exists(name):
    """A message says "see the handout §A.2": that heading is in the handout (a title alone, as in
    "see the handout, Forbidden APIs", must be a heading's title)."""
    found = headings(handout(name))
    rules = RULES[name].RULES + getattr(RULES[name], "TRITON_RULES", [])
    pointers = [getattr(rule, "section", "") for rule in rules] + [rule.reason for rule in rules
                                                                   if hasattr(rule, "reason")]
    for pointer in pointers:
        for section in re.findall(r"§[\dA]+(?:\.\d+)?", pointer):
            assert section in found, f"{name}: {pointer!r} points to {section}, not a heading of the handout"
        titled = re.search(r"see the handout, (.+)$", pointer)
        assert not titled or titled.group(1) in found.values(), f"{name}: {pointer!r} names no heading"
