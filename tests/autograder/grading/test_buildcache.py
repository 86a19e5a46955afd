"""The reference's builds, kept across gradings (autograder.grading.buildcache).

Made once, by a process that runs the reference only, they are copied into the Triton cache of each worker that
builds. A kernel that is the reference's takes its build (nothing is compiled); any other is compiled in its own
grading. A submission that attacks the kept builds can spoil only its own copy: the grader's are out of its sight.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.cohort import sample as cohort
from autograder.grading import buildcache
from autograder.grading.client import ServerPool
from autograder.sandbox import policy
from autograder.sandbox.process import RemoteStudent
from autograder.suites.gpu_kernels import scenarios as kernel_scenarios
from kernels.device import has_cuda
from tests.autograder.sandbox import fake

GELU = "test_gelu_matches_float64 or (test_gelu_kernel_builds_for_the_course_gpu and bf16)"


def gelu_requests() -> list[dict]:
    return kernel_scenarios._build_requests("gelu", "bf16", "sm_90")[1]


def contents(root: Path) -> dict[str, str]:
    """Every file below root, by its path, with the hash of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, Path, float]:
    """(cache root, the reference's GeLU builds, the CPU seconds their making took)."""
    root = tmp_path_factory.mktemp("build-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(buildcache.VARIABLE, str(root))
        folder, cpu = buildcache.reference_builds(gelu_requests(), make=True)
    assert folder is not None
    return root, folder, cpu


def test_the_reference_builds_are_made_once_readable_by_all_and_written_by_none(made, monkeypatch):
    root, folder, cpu = made
    monkeypatch.setenv(buildcache.VARIABLE, str(root))
    entries = [p for p in folder.iterdir() if p.is_dir()]
    assert len(entries) == 2, entries  # the GeLU kernel in bf16 and in fp16
    assert cpu > 0.5, "the builds were compiled, in a process of their own"
    for path in folder.rglob("*"):
        assert path.stat().st_mode & 0o777 == (0o755 if path.is_dir() else 0o644), path
    assert buildcache.reference_builds(gelu_requests(), make=True) == (folder, 0.0)  # kept: nothing compiled
    # Builds asked for later are added to the same folder, by a server only; a single grading takes what is there.
    softmax = kernel_scenarios._build_requests("softmax", "bf16", "sm_90")[1]
    assert buildcache.reference_builds(softmax, make=False) == (folder, 0.0)
    assert len([p for p in folder.iterdir() if p.is_dir()]) == 2
    monkeypatch.setenv(buildcache.VARIABLE, "off")
    assert buildcache.reference_builds(gelu_requests(), make=True) == (None, 0.0)


def test_builds_asked_for_later_are_added_and_a_new_reference_replaces_the_old(tmp_path, monkeypatch):
    """A second set of builds joins the first in the folder of the same reference and compiler; a reference
    changed by one line is another folder, made afresh, and the old one is removed."""
    monkeypatch.setenv(buildcache.VARIABLE, str(tmp_path / "cache"))
    reference = tmp_path / "solutions"
    shutil.copytree(buildcache.SOLUTIONS / "gpu_kernels", reference / "gpu_kernels")
    first, _ = buildcache.reference_builds(gelu_requests(), make=True, reference=reference)
    assert first is not None and len([p for p in first.iterdir() if p.is_dir()]) == 2
    softmax = kernel_scenarios._build_requests("softmax", "bf16", "sm_90")[1]
    again, cpu = buildcache.reference_builds(gelu_requests() + softmax, make=True, reference=reference)
    assert again == first and cpu > 0.5
    assert len([p for p in first.iterdir() if p.is_dir()]) == 6  # the softmax kernels in both dtypes added
    source = reference / "gpu_kernels" / "matmul.py"
    source.write_text(source.read_text() + "\n# changed\n")
    other, _ = buildcache.reference_builds(gelu_requests(), make=True, reference=reference)
    assert other is not None and other != first and not first.exists()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [other.name, f"{other.name}.lock"]


def test_a_reference_without_the_assignment_makes_no_builds(tmp_path, monkeypatch):
    monkeypatch.setenv(buildcache.VARIABLE, str(tmp_path / "cache"))
    (tmp_path / "reference").mkdir()
    assert buildcache.reference_builds(gelu_requests(), make=True, reference=tmp_path / "reference") == (None, 0.0)
    assert not (tmp_path / "cache").exists()


def build_in(scratch: Path, tree: Path) -> list[dict]:
    """The GeLU's requests answered by a compiler process with `tree` on its path and scratch/.triton as its
    Triton cache, as a worker's compile child is."""
    inbox, outbox = scratch / "request.json", scratch / "answer.json"
    inbox.write_text(json.dumps({"requests": gelu_requests()}))
    env = {**os.environ, "PYTHONPATH": f"{buildcache.ROOT}{os.pathsep}{tree}", "TRITON_INTERPRET": "0",
           "TRITON_CACHE_DIR": str(scratch / buildcache.TRITON_CACHE)}
    done = subprocess.run([sys.executable, "-m", "kernels.crosscompile", "--request", str(inbox), "--out",
                           str(outbox)], env=env, cwd=scratch, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(outbox.read_text())["answers"]
    assert all(b["ok"] for a in answers for b in a["builds"]), answers
    return answers


def test_a_kernel_that_is_the_references_takes_its_build_and_any_other_is_compiled(made, tmp_path):
    """Seeded into a worker's cache at another place than where they were made (Triton's entries name their
    files by absolute path: the copy names its own), the reference's builds are taken as they are: nothing
    is written. The same tree elsewhere takes them too; a GeLU kernel changed by one line compiles both
    of its builds."""
    _, folder, _ = made
    tree = tmp_path / "elsewhere"
    shutil.copytree(buildcache.SOLUTIONS / "gpu_kernels", tree / "gpu_kernels")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert buildcache.seed(folder, scratch, str(scratch)) == 2
    for group in scratch.glob(".triton/*/__grp__*.json"):
        for path in json.loads(group.read_text())["child_paths"].values():
            assert Path(path).parent == group.parent, path
    build_in(scratch, tree)
    assert buildcache.compiled(scratch) == 0

    source = tree / "gpu_kernels" / "elementwise.py"
    text = source.read_text()
    changed = text.replace("def _gelu_tanh_kernel(", "def _gelu_tanh_kernel(  # changed\n", 1) if "def _gelu_tanh_kernel(" in text \
        else None
    assert changed is not None and changed != text, "the GeLU kernel's name moved: update this test"
    source.write_text(changed)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert buildcache.seed(folder, fresh, str(fresh)) == 2
    build_in(fresh, tree)
    assert buildcache.compiled(fresh) == 2


def test_the_builds_are_never_copied_through_a_link_the_submission_placed(made, tmp_path):
    _, folder, _ = made
    scratch, elsewhere = tmp_path / "scratch", tmp_path / "elsewhere"
    scratch.mkdir()
    elsewhere.mkdir()
    (scratch / buildcache.TRITON_CACHE).symlink_to(elsewhere)
    assert buildcache.seed(folder, scratch, str(scratch)) == 0
    assert list(elsewhere.iterdir()) == []
    assert buildcache.compiled(scratch) == 0


ATTACK = """
import os
from pathlib import Path


def attack(kept):
    \"\"\"Spoil every build this worker was given, and write where the grader keeps the reference's.\"\"\"
    spoiled, planted = 0, False
    for path in Path(os.environ["TRITON_CACHE_DIR"]).rglob("*"):
        if path.is_file():
            path.write_bytes(b"spoiled")
            spoiled += 1
    try:
        Path(kept).mkdir(parents=True, exist_ok=True)
        (Path(kept) / "planted").write_text("x")
        planted = True
        for path in Path(kept).rglob("*"):
            if path.is_file():
                path.write_bytes(b"spoiled")
    except OSError:
        pass
    return {"spoiled": spoiled, "planted": planted}
"""


@pytest.fixture(params=["exec", "forked"])
def attacker(request, tmp_path_factory, made):
    """A worker given the reference's builds as the grader gives them, whose submission attacks them: as a single
    grading starts one, and forked from a grading server's zygote."""
    protections = policy.detect("auto", policy.Limits(call_timeout=30, start_timeout=120))
    if not protections.bwrap:
        pytest.skip("without bubblewrap the worker sees the grader's files")
    zygote = None
    if request.param == "forked":
        zygote = fake.zygote(tmp_path_factory.mktemp("zygote"), protections)
        worker = fake.forked_worker(zygote, "stage", "spoiler", {"m": ATTACK}, protections)
    else:
        worker = fake.worker(tmp_path_factory.mktemp("sandbox"), "spoiler", {"m": ATTACK}, call_timeout=30)
    account = worker.shared_account()
    worker.scratch.mkdir(parents=True, exist_ok=True)
    given = buildcache.seed(made[1], worker.scratch, worker.scratch_inside(),
                            *((account.uid, account.gid) if account is not None else ()))
    assert given == 2
    yield worker
    worker.stop()
    if zygote is not None:
        zygote.stop()


def test_a_submission_that_attacks_the_builds_spoils_only_its_own_copy(made, attacker):
    """The worker may do what it likes with its copy of the builds (its own Triton cache); the grader's are out of
    its sight, and stay byte for byte as they were."""
    root, folder, _ = made
    before = contents(root)
    done = RemoteStudent(attacker, timeout=30).call("spoiler.m:attack", str(root))
    builds = [name for name in contents(folder) if name != buildcache.INDEX]
    assert done["spoiled"] == len(builds), done  # it had a copy of every build's file, and wrote it
    assert contents(root) == before
    assert not any(p.name == "planted" for p in root.rglob("*"))


@pytest.mark.skipif(has_cuda(), reason="a CPU grader's compile checks")
def test_a_grading_server_makes_the_reference_builds_at_its_first_need_and_gives_them(tmp_path, monkeypatch):
    """The first grading of a server whose compile checks ask for builds makes the reference's (its log says so,
    and its report counts their CPU seconds); the reference graded then takes them: its GeLU build check passes,
    and nothing is compiled in its grading."""
    root = tmp_path / "build-cache"
    monkeypatch.setenv(buildcache.VARIABLE, str(root))
    (reference,) = cohort.build(tmp_path / "cohort", ["gpu_kernels"], [cohort.Member("correct", "solutions")])
    pool = ServerPool(select=GELU)
    try:
        graded = pool.grade(reference)
    finally:
        pool.close()
    (check,) = [t for t in graded.tests if t.name.endswith("test_gelu_kernel_builds_for_the_course_gpu[bf16]")]
    assert check.status == "passed", check.message
    (line,) = [line for line in graded.log if line.startswith("compile checks:")]
    assert line.startswith("compile checks: 0 kernel build(s) compiled") and "reference's 2 build(s)" in line, line
    assert "made by this grading" in line and graded.timings["cpu_reference"] > 0.5, (line, graded.timings)
    assert len([p for p in root.iterdir() if p.is_dir()]) == 1


def test_every_compile_check_of_a_suite_is_made_ahead_by_one_command(tmp_path, monkeypatch, capsys):
    """`python -m autograder.grading.buildcache` makes the builds that a grading of the whole suite asks for:
    gpu_kernels' GeLU, softmax and matmul in bf16 and fp16 (10 builds: the softmax and the matmul launch two
    kernels); turned off, it makes none."""
    from autograder.suites.gpu_kernels import test_gpu_compile as checks

    requests = buildcache.every_request(["gpu_kernels", "resource_accounting"])
    assert requests == buildcache.requests_of([(kernel_scenarios.gpu_builds, checks.build_call(kind, dtype))
                                               for kind in ("gelu", "softmax", "matmul") for dtype in ("bf16", "fp16")])
    monkeypatch.setenv(buildcache.VARIABLE, "off")
    assert buildcache.main(["--assignments", "gpu_kernels"]) == 0
    assert "turned off" in capsys.readouterr().out
    monkeypatch.setenv(buildcache.VARIABLE, str(tmp_path / "cache"))
    assert buildcache.main(["--assignments", "gpu_kernels"]) == 0
    (folder,) = [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]
    assert len([p for p in folder.iterdir() if p.is_dir()]) == 10
    assert "made now" in capsys.readouterr().out
    assert buildcache.main(["--assignments", "gpu_kernels"]) == 0
    assert "made before" in capsys.readouterr().out
