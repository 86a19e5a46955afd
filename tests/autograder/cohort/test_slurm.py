"""`autograder batch --executor slurm` against a real single-node Slurm that these tests start.

One cluster for the session (autograder/cohort/cluster/slurm-up.sh, torn down by slurm-down.sh and checked
gone by its PIDs); skipped, with the script's reason, where Slurm cannot be started (not root, or no
apt-get to install it). The cohort is small and grades resource_accounting only: the reference, the
stubs, a mistake, a cheat, and a submission whose code crashes the process grading it.
"""

import os
import shutil
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from autograder.cohort import sample as cohort
from autograder.cohort.batch import run_batch
from autograder.cli import main
from autograder.cohort.course import ClusterOptions
from autograder.cohort.executors import SlurmExecutor
from autograder.report.gradebook import Gradebook
from tests.autograder.report.test_gradebook import quiet

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = ROOT / "autograder" / "cohort" / "cluster"
TIMEOUT = 10.0  # seconds per call into student code: no honest call here takes more than a second or two

CRASH = cohort.Member("crash-abort", "solutions", (cohort.Edit(
    "resource_accounting/flops.py",
    'return 2 * _count("m", m) * _count("n", n) * _count("p", p)',
    'return __import__("os").abort()'),))


def members() -> list:
    chosen = {m.name: m for m in cohort.MEMBERS}
    return [chosen["correct"], chosen["stubs"], chosen["mistake-matmul-flops"], chosen["cheat-always-equal"], CRASH]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").is_dir() and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A single-node Slurm for the session, torn down at its end: its state folder."""
    pytest.importorskip("submitit", reason="submitit (an instructor dependency) is not installed")
    state = tmp_path_factory.mktemp("slurm")
    up = subprocess.run([str(CLUSTER / "slurm-up.sh"), str(state)], capture_output=True, text=True, timeout=900)
    if up.returncode == 3:
        pytest.skip(up.stderr.strip())
    pids = [int(line.split()[1]) for line in (state / "pids").read_text().splitlines()] \
        if (state / "pids").exists() else []
    try:
        assert up.returncode == 0, f"slurm-up.sh failed:\n{up.stdout}\n{up.stderr}"
        yield state
    finally:
        down = subprocess.run([str(CLUSTER / "slurm-down.sh"), str(state)], capture_output=True, text=True,
                              timeout=300)
        left = [pid for pid in pids if alive(pid)]
        assert down.returncode == 0 and not left, f"Slurm daemons left running: {left}\n{down.stderr}"


@pytest.fixture(scope="module")
def slurm(slurm_cluster):
    """The cluster, with SLURM_CONF and the sacct shim set in this process's environment for this module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_CONF", str(slurm_cluster / "slurm.conf"))
        patch.setenv("PATH", f"{CLUSTER / 'bin'}{os.pathsep}{os.environ['PATH']}")
        yield slurm_cluster


@pytest.fixture(scope="module")
def sample(tmp_path_factory, slurm):
    """The cohort, and its gradebook rows and tests graded by the local executor (the default)."""
    root = tmp_path_factory.mktemp("cohort")
    cohort.build(root / "c", ["resource_accounting"], members())
    run_batch(root / "c", root / "local", call_timeout=TIMEOUT, console=quiet())
    return root / "c", book_of(root / "local")


def book_of(out: Path) -> dict:
    """{name: (status, score, max_score, [(test, status, points), ...])} of a gradebook."""
    with Gradebook(out / "gradebook.sqlite") as book:
        return {row["name"]: (row["status"], row["score"], row["max_score"],
                              [(t["name"], t["status"], t["points"]) for t in book.tests(row["name"])])
                for row in book.rows()}


def slurm_executor(**options) -> SlurmExecutor:
    chosen = {"executor": "slurm", "per_task": 3, "cpus_per_task": 1, "time": 10, **options}
    return SlurmExecutor(ClusterOptions(**chosen), call_timeout=TIMEOUT, poll_s=0.2, state_every_s=1.0)


def test_the_cluster_grades_the_cohort_as_this_machine_does(sample, tmp_path):
    directory, local = sample
    assert {name: row[:3] for name, row in local.items()} == {
        "correct": ("graded", 224.5, 231.5), "stubs": ("graded", 0.0, 231.5),
        "mistake-matmul-flops": ("graded", 182.0, 231.5), "cheat-always-equal": ("graded", 0.0, 231.5),
        "crash-abort": ("graded", local["crash-abort"][1], 231.5)}
    assert local["correct"][1] > local["crash-abort"][1] > 0  # only what calls matmul_flops crashed
    executor = slurm_executor()
    rows = run_batch(directory, tmp_path / "out", console=quiet(), executor=executor)
    assert [row["status"] for row in rows] == ["graded"] * 5
    assert book_of(tmp_path / "out") == local
    assert len(executor.jobs) == 2  # 5 submissions, 3 per task
    reports = tmp_path / "out" / ".slurm" / "reports"
    assert sorted(p.parent.name for p in reports.glob("*/*.json")) == sorted(local)
    for name in local:
        assert (tmp_path / "out" / "submissions" / name / "feedback.md").is_file()
    # Rerunning submits nothing: every submission has a report for its digest.
    again = slurm_executor()
    run_batch(directory, tmp_path / "out", console=quiet(), executor=again)
    assert again.jobs == []


def squeue(*args: str) -> str:
    return subprocess.run(["squeue", "-h", *args], capture_output=True, text=True, check=True).stdout


CHOSEN = ["correct", "mistake-matmul-flops", "stubs"]


def start_and_interrupt(directory: Path, tmp_path: Path, interrupt) -> tuple[Path, Path, SlurmExecutor, dict]:
    """Grade three submissions in one task (in name order), from a head thread; once the first report is
    written, call interrupt(the task's job) and wait for the head to finish."""
    subset = tmp_path / "c"
    for name in CHOSEN:
        shutil.copytree(directory / name, subset / name)
    out = tmp_path / "out"
    executor = slurm_executor(per_task=3)
    first: dict = {}
    head = threading.Thread(target=lambda: first.setdefault("rows", run_batch(subset, out, console=quiet(),
                                                                                executor=executor)))
    head.start()
    deadline = time.monotonic() + 300
    while not list((out / ".slurm" / "reports").glob("*/*.json")) and head.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert executor.jobs, "the batch submitted no job"
    interrupt(executor.jobs[0])
    head.join(timeout=300)
    assert not head.is_alive()
    return subset, out, executor, first


def preempt(job) -> None:
    """What Slurm does to a preempted job (submitit's own test hook): SIGTERM, then the signal submitit
    turns into a requeue. Slurm holds a requeued job back until the credential of its first run has
    expired (a job started before that is killed as "non-startable: credential revoked"): slurm-up.sh
    makes that 10 s, where a production cluster's default is 120 s."""
    job._interrupt()


def test_a_preempted_task_is_requeued_and_finishes_its_submissions(sample, tmp_path):
    directory, local = sample
    _, out, executor, first = start_and_interrupt(directory, tmp_path, preempt)
    job = subprocess.run(["scontrol", "show", "job", executor.jobs[0].job_id], capture_output=True, text=True)
    assert [row["status"] for row in first["rows"]] == ["graded"] * 3, \
        ([row["message"] for row in first["rows"]], (executor.jobs[0].stderr() or "")[-6000:], job.stdout)
    assert book_of(out) == {name: local[name] for name in CHOSEN}
    log = executor.jobs[0].stderr() or ""
    assert "requeu" in log.lower(), log[-3000:]


def test_a_cancelled_task_loses_nothing_and_counts_nothing_twice(sample, tmp_path):
    directory, local = sample
    chosen = CHOSEN
    cancel = lambda job: subprocess.run(["scancel", job.job_id], check=True)  # noqa: E731
    subset, out, executor, first = start_and_interrupt(directory, tmp_path, cancel)
    statuses = {row["name"]: row["status"] for row in first["rows"]}
    assert statuses["correct"] == "graded", "the first submission's report was lost"
    cancelled = [row for row in first["rows"] if row["status"] == "error"]
    assert cancelled, "the task finished before it could be cancelled: nothing was tested"
    assert all("CANCELLED" in row["message"] for row in cancelled), [row["message"] for row in cancelled]
    assert squeue("-t", "RUNNING,PENDING,COMPLETING") == ""

    rerun = slurm_executor(per_task=3)
    rows = run_batch(subset, out, console=quiet(), executor=rerun)
    graded_again = [name for job in rerun.jobs for name in job.result()]
    assert sorted(graded_again) == sorted(row["name"] for row in cancelled)
    assert [row["status"] for row in rows] == ["graded"] * 3
    assert book_of(out) == {name: local[name] for name in chosen}
    db = sqlite3.connect(out / "gradebook.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert dict(db.execute("SELECT submission, COUNT(*) FROM tests GROUP BY submission")) == \
        {name: len(local[name][3]) for name in chosen}


def test_a_gpu_request_on_a_cpu_only_cluster_fails_with_a_clear_message(sample, tmp_path, capsys):
    directory, _ = sample
    with pytest.raises(SystemExit) as exit:
        main(["batch", str(directory), "--out", str(tmp_path / "out"), "--executor", "slurm",
              "--gpus-per-task", "1", "--partition", "cpu"])
    assert exit.value.code == 2
    error = capsys.readouterr().err
    assert "the cluster refused the grading job" in error and "--gpus-per-task 1 asks for GPUs" in error
    assert "partition cpu has none" in error
    assert squeue() == ""
