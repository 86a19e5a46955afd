"""`make check-answers` (autograder/written/check.py): a student sees what the grader will read in answers.md,
part by part, before submitting; the reading is the grader's own (the same function), and no key shows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.written import check
from autograder.written.answers import grade_answers, handout_questions, read_answers

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def release(tmp_path):
    """assignments/ as a student has it: the released handouts and the answers templates."""
    for name in ("resource_accounting", "gpu_kernels"):
        (tmp_path / name).mkdir()
        for file in ("README.md", "answers.md"):
            shutil.copyfile(ROOT / "assignments" / name / file, tmp_path / name / file)
    return tmp_path


def write(release: Path, name: str, text: str) -> None:
    (release / name / "answers.md").write_text(text)


def test_the_template_reads_as_not_answered_and_passes(release, capsys):
    assert check.main(["--root", str(release)]) == 0
    out = capsys.readouterr().out
    assert "0 of 9 numbers read, 0 of 3 prose answers written" in out  # resource_accounting
    assert "0 of 41 numbers read, 0 of 10 prose answers written" in out  # gpu_kernels
    assert "!" not in out


def test_each_part_shows_the_number_the_grader_reads_or_why_none(release, capsys):
    write(release, "resource_accounting", "# Written answers\n\n## Q6.1\n\nQ6.1.a = 6.3·10¹ ms\nQ6.1.b = 2048 tokens\n"
          "Q6.1.b = 2049\nQ6.1.c = about forty\nQ6.1.d =\nQ6.1.e = 319.5\n\nAnswer:\nThe prose, 42.\n\n"
          "## Q9.1\nQ9.1.a = 8589934592\n")
    assert check.main(["--root", str(release), "resource_accounting"]) == 1
    lines = {line.split()[1] if line.startswith("  !") else line.split()[0]: line
             for line in capsys.readouterr().out.splitlines() if line.startswith("  ") and "numbers read" not in line}
    assert lines["Q6.1.a"].strip() == "Q6.1.a   reads 63 (from '6.3·10¹ ms')"
    assert lines["Q6.1.b"].startswith("  !") and "answered on 2 lines" in lines["Q6.1.b"]
    assert lines["Q6.1.c"].startswith("  !") and "found 'about forty'" in lines["Q6.1.c"]
    assert not lines["Q6.1.d"].startswith("  !") and "a number appears below `Answer:`" in lines["Q6.1.d"]
    assert lines["Q6.1.e"].startswith("  !") and "graded exactly, so it must be a whole number" in lines["Q6.1.e"]
    assert "prose: 14 characters" in lines["Q6.1"]
    assert "reads 8589934592 (from '8589934592')" in lines["Q9.1.a"]  # in full, not 8.59e+09
    assert lines["Q9.1.b"].startswith("  !") and "no line `Q9.1.b =`" in lines["Q9.1.b"]
    assert lines["Q10.1.a"].startswith("  !") and "no section `## Q10.1`" in lines["Q10.1.a"]


def test_the_check_reads_what_the_grader_grades(release):
    """Every part the check reads as a number is one the grader grades by that number: with the authors' keys,
    the model answers read in full pass, and a part the check cannot read scores nothing."""
    shutil.copyfile(ROOT / "solutions" / "gpu_kernels" / "answers.md", release / "gpu_kernels" / "answers.md")
    rows, problem = check.check("gpu_kernels", release)
    assert problem == "" and all(r.answered and not r.bad for r in rows)
    results = grade_answers("gpu_kernels", handout_questions("gpu_kernels"),
                            read_answers(release / "gpu_kernels" / "answers.md"))
    numbers = {r.name.removeprefix("written/"): r for r in results if r.status != "manual"}
    assert {r.id for r in rows if not r.prose} == set(numbers)
    assert all(r.status == "passed" for r in numbers.values())


def test_no_answers_file_and_an_unknown_assignment_say_what_to_do(release, capsys):
    (release / "gpu_kernels" / "answers.md").unlink()
    assert check.main(["--root", str(release), "gpu_kernels"]) == 1
    out = capsys.readouterr().out
    assert "! gpu_kernels: nothing is graded: no gpu_kernels/answers.md in the submission" in out
    assert "T1.a" not in out  # said once, not for every part
    with pytest.raises(SystemExit) as exit_:
        check.main(["--root", str(release), "nonesuch"])
    assert exit_.value.code == 2 and "no assignment nonesuch" in capsys.readouterr().err


AMBIGUOUS = {  # part: (what the student wrote, what the grader reads, why `!`, or "" where nothing is in doubt)
    "T1.a": ("2944 or 3072", 2944, "'or': two answers? The grader reads the first, 2944"),
    "T1.b": ("295 FLOP/byte", 295, ""),  # a unit with a slash is not an expression
    "T3.a": ("4096^2*2*3", 16777216, "an expression: the grader does not compute it, it reads 16777216"),
    "T3.c": ("2^33 bytes", 8589934592, ""),  # a power reads as its value
    "T4.b": ("800/1280 = 0.625", 800, "an expression: the grader does not compute it, it reads 800"),
    "T5.c": ("51.8%", 51.8, "a percent sign where the part asks for a fraction: 51.8% is read as 51.8, not 0.518"),
    "T10.a": ("0.8 (about 2.7 TB/s)", 0.8, "2 numbers: the grader reads only the first, 0.8"),
}


def test_a_line_the_grader_may_read_otherwise_is_marked_with_the_number_it_reads(release, capsys):
    sections = {}
    for part, (written, _, _) in AMBIGUOUS.items():
        sections.setdefault(part.split(".")[0], []).append(f"{part} = {written}")
    write(release, "gpu_kernels", "".join(f"## {q}\n" + "\n".join(lines) + "\n\n" for q, lines in sections.items()))
    assert check.main(["--root", str(release), "gpu_kernels"]) == 1
    out = capsys.readouterr().out
    lines = {line.split()[1] if line.startswith("  !") else line.split()[0]: line for line in out.splitlines()
             if line.startswith("  ") and "numbers read" not in line}
    for part, (written, reads, why) in AMBIGUOUS.items():
        line = lines[part]
        assert f"reads {reads} (from {written!r})" in line, line
        assert line.startswith("  !") == bool(why) and why in line, line
    assert "or may read otherwise than you meant" in out


def test_the_grader_reads_the_number_the_check_shows_and_says_why_it_may_differ(release):
    """The same reading serves both (answers.read_part): with the authors' keys, each line scores what its number
    is worth, the number the check showed, and a wrong one's feedback says how the line was read."""
    text = "".join(f"## {part.split('.')[0]}\n{part} = {written}\n\n" for part, (written, _, _) in AMBIGUOUS.items())
    write(release, "gpu_kernels", text)
    rows = {row.id: row for row in check.check("gpu_kernels", release)[0]}
    results = {r.name.removeprefix("written/"): r for r in grade_answers(
        "gpu_kernels", handout_questions("gpu_kernels"), read_answers(release / "gpu_kernels" / "answers.md"))}
    for part, (written, reads, why) in AMBIGUOUS.items():
        assert f"reads {reads} " in rows[part].text
        if results[part].status == "failed":
            assert f"got {reads:g}" in results[part].message and why in results[part].message, results[part].message
    assert results["T4.b"].status == results["T5.c"].status == "failed"  # 800 and 51.8 are not the keys
