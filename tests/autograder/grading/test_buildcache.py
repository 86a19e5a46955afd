"""The reference's builds, kept across gradings (autograder.grading.buildcache).

Made once, by a process that runs the reference only, they are copied into the Triton cache of each worker that
builds, as a user of its own. A kernel that is the reference's takes its build (nothing is compiled); any other is
compiled in its own grading. A submission can neither list nor spoil the builds it was given (they would show the
reference), and the grader's are out of its sight.
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


def test_the_reference_builds_are_made_once_and_are_the_graders_only(made, monkeypatch):
    root, folder, cpu = made
    monkeypatch.setenv(buildcache.VARIABLE, str(root))
    entries = [p for p in folder.iterdir() if p.is_dir()]
    assert len(entries) == 2, entries  # the GeLU kernel in bf16 and in fp16
    assert cpu > 0.5, "the builds were compiled, in a process of their own"
    for path in [root, folder, *folder.rglob("*")]:  # they show the reference: no other user may read them
        assert path.stat().st_mode & 0o077 == 0, path
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
    assert buildcache.seed(folder, scratch, str(scratch), own_user=True) == 2
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
    assert buildcache.seed(folder, fresh, str(fresh), own_user=True) == 2
    build_in(fresh, tree)
    assert buildcache.compiled(fresh) == 2


def test_the_builds_are_never_copied_through_a_link_the_submission_placed(made, tmp_path):
    _, folder, _ = made
    scratch, elsewhere = tmp_path / "scratch", tmp_path / "elsewhere"
    scratch.mkdir()
    elsewhere.mkdir()
    (scratch / buildcache.TRITON_CACHE).symlink_to(elsewhere)
    assert buildcache.seed(folder, scratch, str(scratch), own_user=True) == 0
    assert list(elsewhere.iterdir()) == []
    assert buildcache.compiled(scratch) == 0


def test_a_worker_that_runs_as_the_graders_own_user_is_given_no_builds(made, tmp_path):
    """It could list them (a user may open what it owns), and read the reference in them."""
    _, folder, _ = made
    assert buildcache.seed(folder, tmp_path, str(tmp_path), own_user=False) == 0
    assert list(tmp_path.iterdir()) == []


ATTACK = """
import os
from pathlib import Path


def attack(kept, key, group):
    \"\"\"What a submission can do with the builds it was given, and with those the grader keeps.\"\"\"
    import json

    cache = Path(os.environ["TRITON_CACHE_DIR"])
    done = {"listed": None, "found": len([p for p in cache.rglob("*") if p.is_file()]), "spoiled": 0}
    try:
        done["listed"] = os.listdir(cache)
    except OSError:
        pass
    entry = cache / key  # reached by its key and names, as Triton reaches it for a kernel that is the reference's
    files = [Path(p) for p in json.loads((entry / group).read_text())["child_paths"].values()]
    done["read_by_key"] = all(f.read_bytes() for f in files) and any(f.suffix == ".ptx" for f in files)
    for path in [entry / group, *files]:
        try:
            path.write_bytes(b"spoiled")
            done["spoiled"] += 1
        except OSError:
            pass
    for undo in (lambda: entry.rename(cache / "moved"), lambda: os.chmod(cache, 0o777),
                 lambda: os.chmod(entry, 0o777)):
        try:
            undo()
            done["spoiled"] += 1
        except OSError:
            pass
    (cache / "its-own").mkdir()  # its own builds: Triton adds them here
    done["made_own"] = (cache / "its-own").is_dir()
    try:
        Path(kept).mkdir(parents=True, exist_ok=True)
        (Path(kept) / "planted").write_text("x")
    except OSError:
        pass
    return done
"""


@pytest.fixture
def attacker(tmp_path_factory, made):
    """A worker forked from a grading server's zygote (a user of its own), given the reference's builds as the
    grader gives them, whose submission attacks them."""
    protections = policy.detect("auto", policy.Limits(call_timeout=30, start_timeout=120))
    if not protections.bwrap:
        pytest.skip("without bubblewrap the worker sees the grader's files")
    zygote = fake.zygote(tmp_path_factory.mktemp("zygote"), protections)
    worker = fake.forked_worker(zygote, "stage", "spoiler", {"m": ATTACK}, protections)
    account = worker.shared_account()
    worker.scratch.mkdir(parents=True, exist_ok=True)
    assert buildcache.seed(made[1], worker.scratch, worker.scratch_inside(), own_user=account is not None) == 2
    yield worker
    worker.stop()
    zygote.stop()


def test_a_submission_can_use_the_builds_it_was_given_but_neither_list_nor_spoil_them(made, attacker):
    """The worker finds a build only by Triton's key (which only the reference's source gives): it cannot list its
    Triton cache, so it never sees the reference's IR; it cannot change, move or reopen the builds, only add its
    own. The grader's kept builds are out of its sight, and stay byte for byte as they were."""
    root, folder, _ = made
    before = contents(root)
    key = next(p.name for p in folder.iterdir() if p.is_dir())
    group = next(p.name for p in (folder / key).glob("__grp__*.json"))
    done = RemoteStudent(attacker, timeout=30).call("spoiler.m:attack", str(root), key, group)
    assert done == {"listed": None, "found": 0, "spoiled": 0, "read_by_key": True, "made_own": True}, done
    assert contents(root) == before
    assert not any(p.name == "planted" for p in root.rglob("*"))
    given = attacker.scratch / buildcache.TRITON_CACHE / key
    assert contents(given).keys() == contents(folder / key).keys()  # its copy whole, where it was


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
