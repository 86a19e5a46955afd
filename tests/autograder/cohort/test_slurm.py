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
from autograder.cohort.executors import STOP_MESSAGE, SlurmExecutor
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


def slurm_executor(stop_patience_s: float = 300.0, **options) -> SlurmExecutor:
    chosen = {"executor": "slurm", "per_task": 3, "cpus_per_task": 1, "time": 10, **options}
    return SlurmExecutor(ClusterOptions(**chosen), call_timeout=TIMEOUT, poll_s=0.2, state_every_s=1.0,
                         stop_patience_s=stop_patience_s)


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


def start_and_interrupt(directory: Path, tmp_path: Path, interrupt,
                        stop_patience_s: float = 300.0) -> tuple[Path, Path, SlurmExecutor, dict]:
    """Grade three submissions in one task (in name order), from a head thread; once the first report is
    written, call interrupt(the task's job) and wait for the head to finish."""
    subset = tmp_path / "c"
    for name in CHOSEN:
        shutil.copytree(directory / name, subset / name)
    out = tmp_path / "out"
    executor = slurm_executor(per_task=3, stop_patience_s=stop_patience_s)
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
    if head.is_alive():
        job = executor.jobs[0]
        state = subprocess.run(["scontrol", "show", "job", job.job_id], capture_output=True, text=True).stdout
        subprocess.run(["scancel", job.job_id], check=False)  # the tests after this one start from an empty queue
        head.join(timeout=60)
        pytest.fail(f"the batch did not finish within 300 s of the interruption\n{state}\n"
                    f"{(job.stderr() or '')[-6000:]}\n{(job.stdout() or '')[-3000:]}")
    return subset, out, executor, first


def preempt(job) -> None:
    """What Slurm does to a preempted job, as submitit's own test hook (`job._interrupt()`) does it: SIGTERM,
    then the signal that submitit turns into a requeue; but the second only once the task has taken the
    first (it says so in its log): two signals sent at once may arrive in either order, and a SIGTERM
    that comes second kills the `scontrol requeue` that the first started.

    Slurm holds a requeued job back until the credential of its first run has expired (a job started
    before that is killed as "non-startable: credential revoked"): slurm-up.sh makes that 10 s, where a
    production cluster's default is 120 s."""
    from submitit.slurm.slurm import SlurmJobEnvironment

    subprocess.run(["scancel", "--signal", "TERM", job.job_id], check=True)
    deadline = time.monotonic() + 120
    while STOP_MESSAGE not in (job.stderr() or ""):
        assert time.monotonic() < deadline, f"the task did not take SIGTERM in 120 s:\n{(job.stderr() or '')[-3000:]}"
        time.sleep(0.1)
    subprocess.run(["scancel", "--signal", SlurmJobEnvironment.USR_SIG, job.job_id], check=True)


def test_a_preempted_task_is_requeued_and_finishes_its_submissions(sample, tmp_path):
    directory, local = sample
    _, out, executor, first = start_and_interrupt(directory, tmp_path, preempt)
    job = subprocess.run(["scontrol", "show", "job", executor.jobs[0].job_id], capture_output=True, text=True)
    assert [row["status"] for row in first["rows"]] == ["graded"] * 3, \
        ([row["message"] for row in first["rows"]], (executor.jobs[0].stderr() or "")[-6000:], job.stdout)
    assert book_of(out) == {name: local[name] for name in CHOSEN}
    log = executor.jobs[0].stderr() or ""
    assert "requeu" in log.lower(), log[-3000:]


def interrupted_rows(first: dict, local: dict) -> dict[str, str]:
    """{name: message} of the submissions an interrupted task left ungraded, once checked that the
    submission graded before the interruption kept its report and nothing was left in the queue."""
    statuses = {row["name"]: row["status"] for row in first["rows"]}
    assert statuses["correct"] == "graded", "the first submission's report was lost"
    left = {row["name"]: row["message"] for row in first["rows"] if row["status"] == "error"}
    assert left, "the task finished before it was interrupted: nothing was tested"
    assert set(left) | {"correct"} == set(CHOSEN)
    assert squeue("-t", "RUNNING,PENDING,COMPLETING") == ""
    return left


def test_a_refused_requeue_ends_the_task_at_once_and_keeps_what_it_graded(sample, tmp_path, monkeypatch):
    """submitit requeues from a signal handler that runs wherever the task's main thread is, mid-grading
    included: a refused `scontrol requeue` must end the task (FAILED, naming the refusal), not be taken
    for a submission's error and leave the task waiting for a requeue that never comes."""
    directory, local = sample
    shims = tmp_path / "bin"
    shims.mkdir()
    real = shutil.which("scontrol")
    (shims / "scontrol").write_text(
        "#!/bin/sh\n"
        'if [ "$1" = requeue ]; then echo "scontrol: error: Requeue of JobId=$2 refused (test)" >&2; exit 1; fi\n'
        f'exec {real} "$@"\n')
    (shims / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")  # sbatch passes it to the task
    started = time.monotonic()
    _, out, executor, first = start_and_interrupt(directory, tmp_path, preempt)
    assert time.monotonic() - started < 240, "the task waited for its stop patience instead of failing at once"
    left = interrupted_rows(first, local)
    for message in left.values():
        assert "ended FAILED" in message and "scontrol" in message and "requeue" in message, message
    assert "refused (test)" in (executor.jobs[0].stderr() or "")
    assert book_of(out)["correct"] == local["correct"]


def test_a_task_stopped_and_never_requeued_ends_itself_after_its_patience(sample, tmp_path):
    """SIGTERM alone (sent by hand: Slurm neither kills nor requeues the task afterwards) stops the grading;
    the task then waits its patience for Slurm and ends as failed, so the batch does not wait forever."""
    directory, local = sample
    terminate = lambda job: subprocess.run(["scancel", "--signal", "TERM", job.job_id], check=True)  # noqa: E731
    _, out, executor, first = start_and_interrupt(directory, tmp_path, terminate, stop_patience_s=5.0)
    assert STOP_MESSAGE in (executor.jobs[0].stderr() or "")
    left = interrupted_rows(first, local)
    for message in left.values():
        assert "ended FAILED" in message and "neither ended nor requeued" in message, message
    assert book_of(out)["correct"] == local["correct"]


def test_a_cancelled_task_loses_nothing_and_counts_nothing_twice(sample, tmp_path):
    directory, local = sample
    chosen = CHOSEN
    cancel = lambda job: subprocess.run(["scancel", job.job_id], check=True)  # noqa: E731
    subset, out, executor, first = start_and_interrupt(directory, tmp_path, cancel)
    cancelled = interrupted_rows(first, local)
    assert all("CANCELLED" in message for message in cancelled.values()), cancelled

    rerun = slurm_executor(per_task=3)
    rows = run_batch(subset, out, console=quiet(), executor=rerun)
    graded_again = [name for job in rerun.jobs for name in job.result()]
    assert sorted(graded_again) == sorted(cancelled)
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
