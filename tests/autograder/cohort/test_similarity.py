"""Code similarity (autograder.cohort.similarity, copydetect): copies found through renaming and reordering, the
stubs and independent work not flagged, the page escaped, bad input refused with a reason."""

import ast
import csv
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from autograder.cohort import sample as cohort
from autograder.cli import main
from autograder.cohort.similarity import PUBLIC, SimilarityError, compare, write

ROOT = Path(__file__).resolve().parents[3]
ALTERNATIVES = Path(__file__).resolve().parents[1] / "alternatives"
ASSIGNMENT = "resource_accounting"


def disguised(source: str) -> str:
    """The same module with every argument and local variable renamed (each whole word) and the
    top-level functions in reverse order: what a student hides a copy with."""
    tree = ast.parse(source)
    local = {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}
    local |= {node.id for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
              for node in ast.walk(fn) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    lines = source.splitlines(keepends=True)
    spans = [(min([n.lineno for n in node.decorator_list] + [node.lineno]) - 1, node.end_lineno)
             for node in tree.body if isinstance(node, ast.FunctionDef)]
    blocks = ["".join(lines[a:b]) for a, b in spans]
    kept, last = [], 0
    for (a, b), block in zip(spans, reversed(blocks)):
        kept += ["".join(lines[last:a]), block]
        last = b
    text = "".join(kept + lines[last:])
    for i, name in enumerate(sorted(local - {"self", "cls"})):
        text = re.sub(rf"\b{name}\b", f"renamed_{i}", text)
    return text


def reference(dest: Path, modules=None) -> Path:
    """A submission holding the reference's package (or only some of its modules)."""
    package = dest / ASSIGNMENT
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, package, ignore=shutil.ignore_patterns("__pycache__", "*.md"))
    for path in package.glob("*.py"):
        if modules is not None and path.name not in modules + ["__init__.py"]:
            path.unlink()
    return dest


def pairs_of(result) -> set:
    return {(p.file, p.first, p.second) for p in result.pairs}


def test_a_copy_with_renamed_variables_and_reordered_functions_is_flagged(tmp_path):
    cohort_dir = tmp_path / "cohort"
    reference(cohort_dir / "alice", ["flops.py", "network.py"])
    bob = reference(cohort_dir / "bob", ["flops.py", "network.py"])
    for name in ("flops.py", "network.py"):
        path = bob / ASSIGNMENT / name
        path.write_text(disguised(path.read_text()))
        assert path.read_text() != (cohort_dir / "alice" / ASSIGNMENT / name).read_text()
    result = compare(cohort_dir)
    assert pairs_of(result) == {("flops.py", "alice", "bob"), ("network.py", "alice", "bob")}
    # measured: flops.py 97% and 89%, network.py 91% and 74% (short functions: reordering breaks more k-grams)
    assert all(p.similarity > 0.85 and min(p.first_similarity, p.second_similarity) > 0.7 for p in result.pairs)
    table, page = write(result, tmp_path / "out")
    rows = list(csv.DictReader(table.open()))
    assert {(r["assignment"], r["file"], r["first"], r["second"]) for r in rows} == \
        {(ASSIGNMENT, "flops.py", "alice", "bob"), (ASSIGNMENT, "network.py", "alice", "bob")}
    assert all(int(r["matched_tokens"]) >= 100 and float(r["first_similarity"]) > 0.85 for r in rows)
    html = page.read_text()
    assert html.count("<mark>") >= 4 and "renamed_" in html and "flops.py: alice and bob" in html


def test_independent_honest_work_and_the_stubs_are_not_flagged(tmp_path):
    """The reference, the alternative implementations written apart from it, and the bare stubs."""
    cohort_dir = tmp_path / "cohort"
    reference(cohort_dir / "reference")
    for alternative in sorted(p for p in (ALTERNATIVES / ASSIGNMENT).iterdir() if p.is_dir()):
        package = cohort_dir / alternative.name / ASSIGNMENT
        shutil.copytree(alternative, package)
        (package / "__init__.py").write_text("")
    cohort.build(tmp_path / "sample", [ASSIGNMENT], members=[m for m in cohort.MEMBERS if m.name == "stubs"])
    shutil.copytree(tmp_path / "sample" / "stubs", cohort_dir / "stubs")
    result = compare(cohort_dir)
    assert result.submissions == ["reference", "sequential_checkpoint", "shape_counting", "stubs"]
    assert result.pairs == []


def test_the_sample_cohort_flags_only_its_copies_of_one_source(tmp_path):
    """The sample cohort's honest members are the reference with one line edited each: copies of one
    source by construction, and flagged as such; the cheats share the attack code appended to the stubs,
    and are flagged with each other; the stubs match nothing, and no pair crosses the two groups."""
    cohort.build(tmp_path / "sample", [ASSIGNMENT])
    result = compare(tmp_path / "sample")
    flagged = {name for p in result.pairs for name in (p.first, p.second)}
    honest = {m.name for m in cohort.MEMBERS if m.honest and m.base == "solutions"}
    cheats = {m.name for m in cohort.MEMBERS if not m.honest}
    assert "stubs" not in flagged
    assert honest <= flagged
    assert all({p.first, p.second} <= honest or {p.first, p.second} <= cheats for p in result.pairs)
    assert {p.file for p in result.pairs if {p.first, p.second} <= honest} >= {"flops.py", "training.py", "memory.py"}


def test_copies_of_the_stubs_do_not_match_each_other(tmp_path):
    cohort_dir = tmp_path / "cohort"
    shutil.copytree(ROOT / "assignments" / ASSIGNMENT, cohort_dir / "alice" / ASSIGNMENT)
    with zipfile.ZipFile(cohort_dir / "bob.zip", "w") as archive:
        for path in sorted((ROOT / "assignments" / ASSIGNMENT).glob("*.py")):
            archive.write(path, f"{ASSIGNMENT}/{path.name}")
    result = compare(cohort_dir, threshold=0.01, min_tokens=1)
    assert result.submissions == ["alice", "bob"] and result.files == 2 * 6
    assert result.pairs == []


def test_known_public_solutions_are_compared_with_each_submission(tmp_path):
    cohort_dir = tmp_path / "cohort"
    alice = reference(cohort_dir / "alice", ["flops.py"])
    (alice / ASSIGNMENT / "flops.py").write_text(disguised((alice / ASSIGNMENT / "flops.py").read_text()))
    shutil.copytree(ALTERNATIVES / ASSIGNMENT / "shape_counting", cohort_dir / "bob" / ASSIGNMENT)
    result = compare(cohort_dir, public=ROOT / "solutions")
    assert pairs_of(result) == {("flops.py", "alice", PUBLIC + "solutions")}
    assert result.public == [PUBLIC + "solutions"]


def test_file_names_and_code_cannot_inject_html(tmp_path):
    cohort_dir = tmp_path / "cohort"
    payload = "</pre><script>alert('code')</script><pre>"
    evil_name = "<img src=x onerror=alert(1)>"
    for name in ("alice", evil_name):
        package = reference(cohort_dir / name, ["flops.py"]) / ASSIGNMENT
        text = (package / "flops.py").read_text() + f"\n\ndef shout():\n    return {payload!r} * 2\n"
        (package / "flops.py").write_text(text)
        (package / "<b onmouseover=alert(2)>.py").write_text(text)
    result = compare(cohort_dir)
    assert pairs_of(result) == {("flops.py", evil_name, "alice"), ("<b onmouseover=alert(2)>.py", evil_name, "alice")}
    _, page = write(result, tmp_path / "out")
    html = page.read_text()
    assert "<script>" not in html and "<img" not in html and "<b " not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;b onmouseover=alert(2)&gt;.py" in html


def test_bad_input_is_refused_with_what_to_do(tmp_path, capsys):
    with pytest.raises(SimilarityError, match="is not a folder: give the folder of submissions"):
        compare(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SimilarityError, match="holds no submission to compare"):
        compare(tmp_path / "empty")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "alice.zip").write_bytes(b"not a zip")
    with pytest.raises(SimilarityError, match="alice: alice.zip is not a zip archive"):
        compare(tmp_path / "junk")
    with pytest.raises(SystemExit) as exit_info:
        main(["similarity", str(tmp_path / "empty"), "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert "holds no submission to compare" in capsys.readouterr().err
    with pytest.raises(SimilarityError, match="--public"):
        compare(ROOT / "tests" / "autograder" / "cheats", public=tmp_path / "missing")


def test_the_command_writes_both_results(tmp_path, capsys):
    cohort_dir = tmp_path / "cohort"
    reference(cohort_dir / "alice", ["memory.py"])
    reference(cohort_dir / "bob", ["memory.py"])
    assert main(["similarity", str(cohort_dir), "--out", str(tmp_path / "out")]) == 0
    assert "1 pair(s)" in capsys.readouterr().out
    assert (tmp_path / "out" / "similarity.csv").read_text().count("\n") == 2
    assert (tmp_path / "out" / "report" / "similarity.html").is_file()
