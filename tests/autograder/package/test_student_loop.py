"""The student's loop in the release: the first `make test` on the bare stubs fits on one screen and ends
with the next step, a wrong answer reads as a short note pointing at the student's line, and none of
this changes the points table or the exit status.

The runs use this interpreter (`make test PYTHON=...`), so nothing is installed.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.package import release
from autograder.package.collect import collect
from autograder.package.layout import assignments
from tests.autograder.package.conftest import clean_env

SCREEN = 150  # lines: what a first run may print, install aside
NOTE = 25  # lines: what one failure may take
WRONG = {  # einops_ops: a wrong value, an error raised by a library inside the student's code; merge_heads stays a stub
    "attention_scores": 'return einsum(q, k, "... s1 h, ... s2 h -> ... s1 s2") + 1e-3',
    "split_heads": 'return rearrange(x, "... s (d heads) -> ... heads s d", heads=num_heads)',
}


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("loop") / "student"
    release.build(dest)
    return dest


def make_test(folder: Path, *args: str) -> tuple[int, list[str]]:
    done = subprocess.run(["make", "test", f"PYTHON={sys.executable}", *args], cwd=folder, env=clean_env(),
                          capture_output=True, text=True, timeout=600)
    return done.returncode, (done.stdout + done.stderr).splitlines()


def pytest_status(lines: list[str]) -> str:
    """make's last line names the exit status of the command that failed: `... Error 1`."""
    return next(line for line in reversed(lines) if line.startswith("make:"))


def points(lines: list[str]) -> list[str]:
    return [line for line in lines if "public points" in line]


def last_line(lines: list[str]) -> str:
    return next(line for line in reversed(lines) if not line.startswith("make:"))


def failure(lines: list[str], test: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith("_") and f" {test} " in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("__", "==")))
    return lines[start:end]


def test_the_first_run_on_the_stubs_fits_on_a_screen_and_ends_with_the_next_step(packaged):
    """The release's `make test` on the bare stubs, as a student's first run (the packaging fixture's run of it,
    which tests/autograder/package/test_release.py reads too)."""
    code, output = packaged.job("release-stubs").wait()
    lines = output.splitlines()
    text = "\n".join(lines)
    assert code != 0 and pytest_status(lines).endswith("Error 1"), text[-2000:]
    assert len(lines) < SCREEN, f"{len(lines)} lines:\n{text}"
    assert "Traceback" not in text and "NotImplementedError" not in text, text
    line = (r"^resource_accounting: not started: \d+ tasks, §1 to §\d+ \(\d+ tests, [\d.]+ points\); "
            r"handout: assignments/resource_accounting/README\.md$")
    assert re.search(line, text, re.M), text  # an assignment not started is one line
    assert last_line(lines) == ("next: resource_accounting §1 memory.get_memory_usage does not pass yet; "
                                "run only its tests with: make test T=memory.get_memory_usage"), text[-2000:]

    summary = next(line for line in reversed(lines) if re.search(r" in [\d.]+s", line))
    failures = sum(int(n) for n in re.findall(r"(\d+) (?:failed|errors?)\b", summary))
    waiting = sum(int(n) for line in points(lines) for n in re.findall(r"(\d+) not implemented yet", line))
    assert failures == waiting > 0 and all(" 0 / " in line for line in points(lines)), f"{summary}\n{points(lines)}"
    # A bare stub fails its tests; none errors (a fixture that calls a stub raises in the tests that read it).
    assert not re.search(r"\d+ errors?\b", summary), summary


def test_verbose_shows_every_traceback_with_the_same_points_and_exit_status(student):
    code, lines = make_test(student, "T=memory")
    verbose_code, verbose = make_test(student, "T=memory", "PYTEST_ARGS=-v")
    assert verbose_code == code != 0 and pytest_status(verbose) == pytest_status(lines)
    assert points(verbose) == points(lines) != []
    assert "\n".join(verbose).count("NotImplementedError: get_memory_usage in resource_accounting/memory.py") > 1
    assert len(verbose) > 5 * len(lines)


def test_a_wrong_answer_is_a_short_note_that_names_the_students_line(student, tmp_path):
    copy = tmp_path / "student"
    shutil.copytree(student, copy)
    module = copy / "assignments" / "resource_accounting" / "einops_ops.py"
    source = module.read_text()
    for name, body in WRONG.items():
        source, found = re.subn(rf"raise NotImplementedError\('{name} in .*'\)", body, source)
        assert found == 1, f"the stub of {name} changed: update WRONG"
    module.write_text(source)
    lines_of = {n: i + 1 for i, line in enumerate(source.splitlines()) for n, b in WRONG.items() if b in line}

    code, lines = make_test(copy, "T=einops_ops")
    text = "\n".join(lines)
    assert code != 0 and pytest_status(lines).endswith("Error 1"), text[-2000:]
    for test in ("test_attention_scores_are_query_key_dot_products[batch]",
                 "test_split_heads_rejects_a_head_count_that_does_not_divide_the_width[5]"):
        block = failure(lines, test)
        note = "\n".join(block)
        assert len(block) <= NOTE and "autograder/" not in note and "site-packages" not in note, note
    wrong_value = "\n".join(failure(lines, "test_attention_scores_are_query_key_dot_products[batch]"))
    assert re.search(r"got shape \(3, 5, 6\) torch.float64, expected shape \(3, 5, 6\) torch.float64; "
                     r"90 of 90 elements differ .*; worst at index", wrong_value), wrong_value
    assert re.search(r"your code: assignments/resource_accounting/einops_ops.py:\d+ einops_ops.attention_scores",
                     wrong_value), wrong_value
    raised = "\n".join(failure(lines, "test_split_heads_rejects_a_head_count_that_does_not_divide_the_width[5]"))
    assert f"assignments/resource_accounting/einops_ops.py:{lines_of['split_heads']}: in split_heads" in raised, raised
    assert "EinopsError" in raised, raised
    assert "  §2 einops_ops.merge_heads: not implemented yet (1 test, 1 point)" in lines, text
    assert points(lines) == ["resource_accounting      0 / 14.5  public points  (0/10 tests passed); "
                             "1 not implemented yet"]
    assert last_line(lines).startswith("next: resource_accounting §2 einops_ops.attention_scores does not pass yet")


def test_the_handouts_and_the_student_readme_state_what_needs_a_gpu_as_the_tests_mark_it(student):
    tests = collect(assignments())

    def points(name: str, public: bool, gpu: bool | None = None) -> float:
        return sum(t.points for t in tests if t.assignment == name and t.public == public and gpu in (None, t.gpu))

    readme = (student / "README.md").read_text()
    handouts = {name: (student / "assignments" / name / "README.md").read_text() for name in assignments()}
    accounting, flash = handouts["resource_accounting"], handouts["flash_attention"]
    assert points("resource_accounting", True, True) == 0 and points("resource_accounting", False, True) == 2
    laptop = f"all {points('resource_accounting', True):g} public points can be earned and checked on a laptop"
    assert laptop in accounting
    assert "Two hidden\ntests (1 point each)" in accounting
    gpu, total = points("flash_attention", True, True), points("flash_attention", True)
    assert f"Of the {total:g} public points, {gpu:g} need a GPU" in flash
    assert f"everything else, {total - gpu:g} points" in " ".join(flash.split())
    assert f"The hidden\nsuite has {points('flash_attention', False, True):g} more GPU points" in flash
    assert f"{gpu:g} of the {total:g} public points" in " ".join(readme.split())
    for text in (readme, flash):
        assert "srun --gres=gpu:1 make test" in text and "PYTHON=python3" in text
        assert "Triton 3.6" in text and "torch 2.11" in text


def test_gpu_compile_in_the_release_builds_one_assignment_and_names_its_stubs(student):
    """`make gpu-compile A=gpu_kernels` on the bare stubs: nothing to build yet, each of the three kernels named
    as not implemented, and a clean exit (the flash_attention stubs are not in the way)."""
    done = subprocess.run(["make", "gpu-compile", "A=gpu_kernels", f"PYTHON={sys.executable}"], cwd=student,
                          env=clean_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    named = re.findall(r"^not built, not implemented yet: (gpu_kernels \w+)", done.stdout, re.M)
    assert named == ["gpu_kernels gelu", "gpu_kernels softmax", "gpu_kernels matmul"], done.stdout[-2000:]
    assert "FlashAttention" not in done.stdout
