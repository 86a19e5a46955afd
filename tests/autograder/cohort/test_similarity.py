"""Code similarity (autograder.cohort.similarity, copydetect): copies found through renaming and reordering, and
through code moved, split, merged or renamed across files; one row per pair of submissions and assignment; the
stubs and independent work not flagged, the page escaped, bad input refused with a reason."""

import ast
import csv
import io
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.cohort import sample as cohort
from autograder.cli import main
from autograder.cohort.similarity import PUBLIC, REFERENCE, SimilarityError, compare, write

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


def top_level_functions(source: str) -> tuple[str, list[str]]:
    """(everything before the first top-level function, each top-level function with its decorators)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    spans = [(min([n.lineno for n in node.decorator_list] + [node.lineno]) - 1, node.end_lineno)
             for node in tree.body if isinstance(node, ast.FunctionDef)]
    return "".join(lines[:spans[0][0]]), ["".join(lines[a:b]) + "\n\n" for a, b in spans]


def moved(package: Path) -> None:
    """Each module's code moved into a private helper; the module becomes a one-line re-export."""
    for path in sorted(package.glob("*.py")):
        if path.name != "__init__.py":
            path.rename(package / f"_{path.stem}_impl.py")
            path.write_text(f"from ._{path.stem}_impl import *  # noqa: F401,F403\n")


def split(package: Path, module: str) -> None:
    """The module's functions split over two files, the second under a sub-package, each with the imports."""
    head, functions = top_level_functions((package / module).read_text())
    half = len(functions) // 2
    (package / "parts").mkdir()
    (package / "parts" / "__init__.py").write_text("")
    (package / "parts" / f"more_{module}").write_text(head + "".join(functions[half:]))
    (package / module).write_text(head + "".join(functions[:half]) + f"from .parts.more_{module[:-3]} import *\n")


def merged(package: Path, modules: list[str], into: str) -> None:
    """The modules' code in one file (each disguised), the modules re-exporting it."""
    (package / into).write_text("\n\n".join(disguised((package / m).read_text()) for m in modules))
    for module in modules:
        (package / module).write_text(f"from .{into[:-3]} import *  # noqa: F401,F403\n")


def renamed(package: Path, names: dict[str, str]) -> None:
    for old, new in names.items():
        (package / old).rename(package / new)


def pairs_of(result) -> set:
    return {(p.assignment, p.first, p.second) for p in result.pairs}


def files_of(pair) -> tuple[set, set]:
    return {f.file for f in pair.first_files}, {f.file for f in pair.second_files}


def test_a_copy_with_renamed_variables_and_reordered_functions_is_flagged(tmp_path):
    cohort_dir = tmp_path / "cohort"
    reference(cohort_dir / "alice", ["flops.py", "network.py"])
    bob = reference(cohort_dir / "bob", ["flops.py", "network.py"])
    for name in ("flops.py", "network.py"):
        path = bob / ASSIGNMENT / name
        path.write_text(disguised(path.read_text()))
        assert path.read_text() != (cohort_dir / "alice" / ASSIGNMENT / name).read_text()
    result = compare(cohort_dir)
    assert pairs_of(result) == {(ASSIGNMENT, "alice", "bob")}
    (pair,) = result.pairs
    assert files_of(pair) == ({"flops.py", "network.py"}, {"flops.py", "network.py"})
    # measured: flops.py 97% and 89%, network.py 91% and 74% (short functions: reordering breaks more k-grams)
    assert pair.similarity > 0.85 and min(f.share for f in pair.first_files + pair.second_files) > 0.7
    table, page = write(result, tmp_path / "out")
    (row,) = list(csv.DictReader(table.open()))
    assert (row["assignment"], row["first"], row["second"]) == (ASSIGNMENT, "alice", "bob")
    assert int(row["matched_tokens"]) >= 100 and float(row["similarity"]) > 0.85
    assert re.fullmatch(r"flops\.py \d+%; network\.py \d+%", row["first_files"]), row["first_files"]
    html = page.read_text()
    assert html.count("<mark>") >= 4 and "renamed_" in html and "resource_accounting: alice and bob" in html


COPIES = {  # how bob hid the modules he copied -> (alice's files involved: those copied, bob's files holding them)
    "moved": (moved, MODULES := {"einops_ops.py", "flops.py", "memory.py", "network.py", "training.py"},
              {f"_{m[:-3]}_impl.py" for m in MODULES}),
    "split": (lambda package: split(package, "flops.py"), {"flops.py"}, {"flops.py", "parts/more_flops.py"}),
    "merged": (lambda package: merged(package, ["flops.py", "memory.py", "network.py"], "core.py"),
               {"flops.py", "memory.py", "network.py"}, {"core.py"}),
    "renamed": (lambda package: renamed(package, {"flops.py": "counting.py", "memory.py": "_bytes.py"}),
                {"flops.py", "memory.py"}, {"counting.py", "_bytes.py"}),
}


def honest(dest: Path) -> Path:
    """A package written apart from the reference: the alternatives' modules, all five."""
    package = dest / ASSIGNMENT
    for alternative in ("shape_counting", "sequential_checkpoint"):
        shutil.copytree(ALTERNATIVES / ASSIGNMENT / alternative, package, dirs_exist_ok=True)
    (package / "__init__.py").write_text("")
    return package


@pytest.mark.parametrize("how", sorted(COPIES))
def test_code_moved_split_merged_or_renamed_across_files_is_still_flagged(tmp_path, how):
    """Bob's own package with some of alice's modules copied in and hidden: each file is compared with the
    other submission's whole code, so moving code to other files hides nothing. Bob's own modules are not
    involved."""
    hide, copied, holding = COPIES[how]
    cohort_dir = tmp_path / "cohort"
    reference(cohort_dir / "alice")
    bob = honest(cohort_dir / "bob")
    for module in copied:
        shutil.copyfile(ROOT / "solutions" / ASSIGNMENT / module, bob / module)
    hide(bob)
    result = compare(cohort_dir)
    assert pairs_of(result) == {(ASSIGNMENT, "alice", "bob")}
    (pair,) = result.pairs
    assert files_of(pair) == (copied, holding)
    assert pair.similarity > 0.9 and all(f.share > 0.6 for f in pair.first_files)


def test_one_module_copied_into_an_honest_submission_is_flagged_with_its_files(tmp_path):
    """Only flops.py copied, disguised, into a subfolder under another name; the rest is bob's own."""
    cohort_dir = tmp_path / "cohort"
    reference(cohort_dir / "alice")
    bob = cohort_dir / "bob" / ASSIGNMENT
    shutil.copytree(ALTERNATIVES / ASSIGNMENT / "shape_counting", bob)
    (bob / "__init__.py").write_text("")
    (bob / "flops.py").write_text("from .helpers.counting import *  # noqa: F401,F403\n")
    (bob / "helpers").mkdir()
    (bob / "helpers" / "counting.py").write_text(disguised((ROOT / "solutions" / ASSIGNMENT / "flops.py").read_text()))
    (pair,) = compare(cohort_dir).pairs
    assert files_of(pair) == ({"flops.py"}, {"helpers/counting.py"})
    assert pair.similarity > 0.85 and pair.first_similarity < 0.6  # a share of the whole would have missed it


def test_one_row_per_pair_of_submissions_and_assignment(tmp_path):
    """Three copies of one source (as is, moved, split), each of two assignments, and one honest submission:
    three pairs, two assignments, six rows; none with the honest one."""
    cohort_dir = tmp_path / "cohort"
    for name in ("alice", "bob", "carol"):
        reference(cohort_dir / name)
        shutil.copytree(ROOT / "solutions" / "gpu_kernels", cohort_dir / name / "gpu_kernels",
                        ignore=shutil.ignore_patterns("__pycache__", "*.md"))
    moved(cohort_dir / "bob" / ASSIGNMENT)
    moved(cohort_dir / "bob" / "gpu_kernels")
    split(cohort_dir / "carol" / ASSIGNMENT, "flops.py")
    split(cohort_dir / "carol" / "gpu_kernels", "matmul.py")
    shutil.copytree(ALTERNATIVES / ASSIGNMENT / "shape_counting", cohort_dir / "dave" / ASSIGNMENT)
    result = compare(cohort_dir)
    expected = {(a, x, y) for a in (ASSIGNMENT, "gpu_kernels") for x, y in (("alice", "bob"), ("alice", "carol"),
                                                                             ("bob", "carol"))}
    assert pairs_of(result) == expected and len(result.pairs) == 6
    table, _ = write(result, tmp_path / "out")
    rows = list(csv.DictReader(table.open()))
    assert sorted((r["assignment"], r["first"], r["second"]) for r in rows) == sorted(expected)


def test_independent_honest_work_and_the_stubs_are_not_flagged(tmp_path):
    """The reference, the alternative implementations written apart from it (resource_accounting's and
    flash_attention's; gpu_kernels' are the reference's kernels with one design changed, 70-78% of a file),
    and the bare stubs. Each alternative is also compared with the reference's whole code, not only the file
    of the same name (at most 52% of a file: atomic_dq's flash_triton.py in kernels_module's)."""
    cohort_dir = tmp_path / "cohort"
    assignments = [ASSIGNMENT, "flash_attention"]
    reference(cohort_dir / "reference")
    shutil.copytree(ROOT / "solutions" / "flash_attention", cohort_dir / "reference" / "flash_attention",
                    ignore=shutil.ignore_patterns("__pycache__", "*.md"))
    for assignment in assignments:
        for alternative in sorted(p for p in (ALTERNATIVES / assignment).iterdir() if p.is_dir()):
            package = cohort_dir / alternative.name / assignment
            shutil.copytree(alternative, package)
            (package / "__init__.py").write_text("")
    cohort.build(tmp_path / "sample", assignments, members=[m for m in cohort.MEMBERS if m.name == "stubs"])
    shutil.copytree(tmp_path / "sample" / "stubs", cohort_dir / "stubs")
    result = compare(cohort_dir)
    assert result.submissions == ["atomic_dq", "kernels_module", "normalised_output", "reference",
                                  "sequential_checkpoint", "shape_counting", "stubs"]
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
    assert {f.file for p in result.pairs if {p.first, p.second} <= honest for f in p.first_files} >= \
        {"flops.py", "training.py", "memory.py"}
    assert len({(p.assignment, p.first, p.second) for p in result.pairs}) == len(result.pairs)


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
    assert pairs_of(result) == {(ASSIGNMENT, "alice", PUBLIC + "solutions")}
    assert [files_of(p) for p in result.pairs] == [({"flops.py"}, {"flops.py"})]
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
    assert pairs_of(result) == {(ASSIGNMENT, evil_name, "alice")}
    assert files_of(result.pairs[0]) == ({"flops.py", "<b onmouseover=alert(2)>.py"},) * 2
    _, page = write(result, tmp_path / "out")
    html = page.read_text()
    assert "<script>" not in html and "<img" not in html and "<b " not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;b onmouseover=alert(2)&gt;.py" in html


def test_names_that_a_spreadsheet_would_run_are_text_in_similarity_csv(tmp_path):
    """A submission named like a formula, and a module file named like one, land in similarity.csv as safe_cell
    writes them (a leading quote), so a spreadsheet shows them instead of running them; the plain name is kept."""
    cohort_dir = tmp_path / "cohort"
    formula, file_formula = '=HYPERLINK("evil.invalid","x")', "+cmd|' -C calc'!A0.py"
    for name in ("alice", formula):
        package = reference(cohort_dir / name, ["flops.py"]) / ASSIGNMENT
        (package / file_formula).write_text((package / "flops.py").read_text())
    csv_path, _ = write(compare(cohort_dir), tmp_path / "out")
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8", newline="")))
    assert rows and {(row["first"], row["second"]) for row in rows} == {("'" + formula, "alice")}
    cells = [cell for row in rows for cell in row.values()]
    assert not [cell for cell in cells if cell[:1] in ("=", "+", "-", "@")]
    assert any(file_formula in cell for cell in cells)  # the files compared are listed, none as a formula


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


def test_the_command_writes_both_results_and_says_which_submissions_match_the_reference(tmp_path, capsys):
    """Two copies of the reference: each is listed with the other and, by name, with the reference solution
    (before: only as a pair of two students at 100%, which a reader could not tell from two students copying)."""
    cohort_dir = tmp_path / "cohort"
    reference(cohort_dir / "alice", ["memory.py"])
    reference(cohort_dir / "bob", ["memory.py"])
    assert main(["similarity", str(cohort_dir), "--out", str(tmp_path / "out")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "2 submission(s) match the reference solution: alice, bob" in said and "3 pair(s)" in said
    rows = list(csv.DictReader((tmp_path / "out" / "similarity.csv").open()))
    assert sorted((r["first"], r["second"]) for r in rows) == [
        ("alice", "bob"), ("alice", REFERENCE), ("bob", REFERENCE)]
    assert (tmp_path / "out" / "report" / "similarity.html").is_file()
    assert main(["similarity", str(cohort_dir), "--out", str(tmp_path / "out2"), "--no-reference"]) == 0
    assert "1 pair(s)" in capsys.readouterr().out


def test_two_runs_under_different_hash_seeds_write_the_same_bytes(tmp_path):
    """copydetect hashes with the salted built-in hash(): the command must not depend on the salt."""
    cohort_dir = tmp_path / "cohort"
    modules = ["flops.py", "network.py", "memory.py"]
    for name in ("alice", "bob", "carol"):
        reference(cohort_dir / name, modules)
    for name, module in (("bob", "flops.py"), ("bob", "memory.py"), ("carol", "network.py")):
        path = cohort_dir / name / ASSIGNMENT / module
        path.write_text(disguised(path.read_text()))
    shutil.copytree(ALTERNATIVES / ASSIGNMENT / "shape_counting", cohort_dir / "dave" / ASSIGNMENT)
    written = []
    for seed in ("1", "2", "random"):
        out = tmp_path / f"out-{seed}"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-m", "autograder", "similarity", str(cohort_dir), "--out", str(out),
                        "--no-reference"],
                       cwd=ROOT, env=env, check=True, capture_output=True)
        written.append([(out / rel).read_bytes() for rel in ("similarity.csv", "report/similarity.html")])
    assert written[0] == written[1] == written[2]
    rows = list(csv.DictReader(io.StringIO(written[0][0].decode())))
    shown = [float(r["similarity"]) for r in rows]
    assert len(rows) == 3 and shown == sorted(shown, reverse=True)  # alice, bob and carol: one row per pair
