"""Where a batch grades: threads on this machine, or array tasks on a Slurm cluster through submitit.

An executor's `run(todo, out, console)` takes {name: submission path} and yields (name, outcome) as
each submission is done, in the calling (head) thread, which alone writes the gradebook. An outcome
is the GradeReport, or a string that says why the submission was not graded (it is recorded as a
grader error and graded again on the next run).

`SlurmExecutor` submits one job array: each array task grades `per_task` submissions one after the
other with one warm grading server (autograder.grading.client.GradingServer: a sandbox and worker per
submission, as on this machine) and writes each GradeReport atomically to
OUT/.slurm/reports/<name>/<digest>.json. The head watches those files and the tasks' states:

- a report on disk for a submission's current digest is never graded again (a rerun picks it up);
- a task that is preempted or reaches its time limit is requeued by submitit (GradeTask.checkpoint)
  and skips the submissions whose reports it already wrote;
- a task that ends without a report for some of its submissions (cancelled, failed, killed) leaves
  those recorded as grader errors with the task's state and log, so the next run grades them again.

submitit's logs and each task's stdout and stderr are in OUT/.slurm/logs/.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from autograder.cohort.course import ClusterOptions
from autograder.model.results import GradeReport

Outcome = GradeReport | str
# Slurm job states after which a task runs no more (PREEMPTED and TIMEOUT with a requeue come back as PENDING).
FINISHED = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
            "REVOKED", "SPECIAL_EXIT", "TIMEOUT"}
REQUEUED = {"PREEMPTED", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD"}
FINISH_GRACE_S = 10.0  # seconds a task must stay finished before its ungraded submissions are errors
# Seconds a task sent SIGTERM waits for Slurm to kill or requeue it before it ends itself as failed: more
# than a cluster's KillWait (30 s by default) and preemption GraceTime, so that only a stop that went wrong
# (a signal sent by hand, a requeue that Slurm refused) reaches it.
STOP_PATIENCE_S = 300.0
STOP_MESSAGE = "autograder: SIGTERM received: no submission is started after this one; waiting for Slurm\n"


class ExecutorError(Exception):
    """The executor cannot grade at all: the cluster refused the job, or submitit is missing."""


class LocalExecutor:
    """`workers` threads on this machine, each calling grade_fn (autograder.grading.client.ServerPool.grade)."""

    def __init__(self, workers: int, grade_fn: Callable[[Path], GradeReport]) -> None:
        self.workers, self.grade_fn = workers, grade_fn

    def run(self, todo: dict[str, Path], out: Path, console: Console,
            again: set[str] = frozenset()) -> Iterator[tuple[str, Outcome]]:
        """Grade each of `todo` (`again` does not matter here: every submission given is graded)."""
        columns = (TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="grade")
        try:
            with Progress(*columns, console=console) as progress:
                task = progress.add_task("grading", total=len(todo))
                futures = {pool.submit(self.grade_fn, path): name for name, path in todo.items()}
                for future in as_completed(futures):
                    try:
                        outcome: Outcome = future.result()
                    except Exception as exc:
                        outcome = "".join(traceback.format_exception(exc))
                    yield futures[future], outcome
                    progress.advance(task)
        finally:
            # On Ctrl-C, do not start the submissions still queued; the gradebook keeps what is done.
            pool.shutdown(wait=False, cancel_futures=True)


def report_path(reports: Path, name: str, digest: str) -> Path:
    return reports / name / f"{digest}.json"


def write_atomically(path: Path, text: str) -> None:
    """Write through a temporary file in the same folder and rename it: a reader sees all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_report(path: Path) -> GradeReport | None:
    """The report at path, or None where there is none (or a damaged one, which is removed)."""
    try:
        return GradeReport.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError):
        path.unlink(missing_ok=True)
        return None


def done(report: GradeReport | None) -> bool:
    """Whether a report on disk stands: one without tests is the grader's failure, and one the machine was too
    busy to finish is the grader's overload: both are graded again."""
    return report is not None and bool(report.tests) and not report.overloaded


class GradeTask:
    """What one array task runs on its node: grade its submissions with one warm grading server.

    A method `checkpoint` makes submitit requeue the task when it is preempted or times out; the
    requeued task skips the submissions whose reports are already written.

    submitit requeues from its signal handler, which runs in this task's main thread wherever that is: its
    SystemExit ends the task, and an error of its own (a refused `scontrol requeue`) must not be taken for
    the submission's, so an error raised once the task is stopping ends the task (FAILED, with that
    error in its log) instead of becoming a report. A task left stopping without being ended or requeued
    ends itself as failed after `stop_patience_s`: the head then records its ungraded submissions as
    grader errors, which the next run grades.
    """

    def __init__(self, reports: str, call_timeout: float, overlap: bool, seed: int | None = None,
                 secret: str = "", stop_patience_s: float = STOP_PATIENCE_S) -> None:
        self.reports, self.call_timeout, self.overlap = reports, call_timeout, overlap
        self.seed, self.secret = seed, secret  # the seeds, as on the head (autograder.grading.client.seed_for)
        self.stop_patience_s = stop_patience_s

    def __call__(self, chunk: list[tuple[str, str]]) -> list[str]:
        from autograder.grading.intake import submission_digest
        from autograder.grading.client import GradingServer

        graded = []
        # Slurm ends a cancelled or preempted task with SIGTERM to all its processes: the grading
        # server dies with it, so stop, rather than write its failure down as the submission's report,
        # and wait for Slurm to end or requeue the task (a task that returned would count as completed).
        stopping = threading.Event()

        def stop(*_) -> None:
            if not stopping.is_set():
                os.write(2, STOP_MESSAGE.encode())  # a handler may interrupt print(): write the bytes at once
            stopping.set()

        previous = signal.signal(signal.SIGTERM, stop)
        server = GradingServer(call_timeout=self.call_timeout, overlap=self.overlap)
        try:
            for name, path in chunk:
                # The digest of what this node sees: a submission changed since the head looked is
                # written under its new digest, which the head does not take.
                target = report_path(Path(self.reports), name, submission_digest(Path(path)))
                if stopping.is_set() or done(read_report(target)):
                    continue
                try:
                    report = server.grade(Path(path), seed=self.seed, secret=self.secret)
                except Exception as exc:
                    if stopping.is_set():
                        raise  # from the stop (submitit's requeue), not from this submission
                    report = GradeReport(name, log=[f"the grader failed on this submission on "
                                                    f"{socket.gethostname()}: {type(exc).__name__}: {exc}"])
                if stopping.is_set() and not report.tests:
                    continue
                write_atomically(target, report.to_json())
                graded.append(name)
        finally:
            signal.signal(signal.SIGTERM, previous)
            server.close()
        if stopping.is_set():
            deadline = time.monotonic() + self.stop_patience_s
            while time.monotonic() < deadline:
                time.sleep(1)
            raise RuntimeError(f"this task was sent SIGTERM and was neither ended nor requeued by Slurm within "
                               f"{self.stop_patience_s:g} s; it graded {len(graded)} of its {len(chunk)} "
                               "submission(s), and the next run of the batch grades the rest")
        return graded

    def checkpoint(self, chunk: list[tuple[str, str]]):
        import submitit

        return submitit.helpers.DelayedSubmission(self, chunk)


def sbatch_parameters(options: ClusterOptions) -> dict:
    """submitit.SlurmExecutor's parameters for these options."""
    chosen = {"partition": options.partition, "account": options.account, "qos": options.qos,
              "gpus_per_task": options.gpus_per_task, "constraint": options.constraint, "mem": options.mem}
    parameters = {k: v for k, v in chosen.items() if v is not None}
    parameters.update(time=options.time, cpus_per_task=options.cpus_per_task, ntasks_per_node=1,
                      array_parallelism=options.max_parallel, job_name="autograder",
                      # submitit's job wrapper ignores SIGTERM: ask for the requeue signal 60 s before the end.
                      signal_delay_s=60)
    if options.setup:
        parameters["setup"] = list(options.setup)
    return parameters


def refusal(exc: Exception, options: ClusterOptions) -> str:
    """The message for a submission that sbatch refused, with what to check."""
    said = str(exc).strip().splitlines()
    said = next((line for line in reversed(said) if "error" in line.lower()), said[-1] if said else repr(exc))
    message = f"the cluster refused the grading job: {said.strip()}"
    if options.gpus_per_task and "gres" in said.lower():
        message += (f"; --gpus-per-task {options.gpus_per_task} asks for GPUs, and the partition "
                    f"{options.partition or '(the default)'} has none: choose a GPU partition (sinfo -o '%P %G' "
                    "lists each partition's GPUs) or drop --gpus-per-task")
    else:
        message += "; check the partition, account, QoS and constraint (sinfo, sacctmgr show assoc)"
    return message


@contextlib.contextmanager
def _cancel_on_exit(by_id: dict, waiting: dict[str, list[str]], console: Console):
    """If the head stops early (Ctrl-C, an error), cancel the tasks still at work: the reports they
    wrote are kept, and the next run submits the rest again rather than racing them."""
    try:
        yield
    finally:
        if waiting:
            for job_id in waiting:
                by_id[job_id].cancel(check=False)
            console.print(f"cancelled {len(waiting)} unfinished array task(s); run the batch again to finish")


def check_accounting() -> None:
    """submitit sees its jobs end through `sacct`: refuse to start where sacct cannot answer."""
    try:
        subprocess.run(["sacct", "-o", "JobID,State", "--parsable2", "-j", "1"], check=True, capture_output=True,
                       text=True, timeout=60)
    except FileNotFoundError:
        raise ExecutorError("sacct is not on PATH: run the batch where Slurm's commands are installed") from None
    except subprocess.CalledProcessError as exc:
        raise ExecutorError(f"sacct fails here ({(exc.stderr or exc.stdout).strip()}), and submitit needs it to "
                            "see its jobs end; on a cluster without an accounting database put the repository's "
                            "autograder/cohort/cluster/bin first on PATH (its sacct answers from squeue)") from None
    except subprocess.TimeoutExpired:
        raise ExecutorError("sacct did not answer in 60 s: is the cluster's controller reachable?") from None


class SlurmExecutor:
    """A job array on a Slurm cluster through submitit; the head waits here until every task is done."""

    def __init__(self, options: ClusterOptions, call_timeout: float = 60.0, poll_s: float = 1.0,
                 state_every_s: float = 3.0, seed: int | None = None, secret: str = "",
                 stop_patience_s: float = STOP_PATIENCE_S) -> None:
        self.options, self.call_timeout = options, call_timeout
        self.seed, self.secret = seed, secret
        self.stop_patience_s = stop_patience_s
        self.poll_s, self.state_every_s = poll_s, state_every_s
        self.jobs: list = []  # the submitted array tasks (submitit jobs), for callers that watch them

    def run(self, todo: dict[str, Path], out: Path, console: Console,
            again: set[str] = frozenset()) -> Iterator[tuple[str, Outcome]]:
        """Grade each of `todo` on the cluster, but take a report already on disk, except for those in `again`."""
        from autograder.grading.intake import submission_digest

        reports = (out / ".slurm" / "reports").resolve()
        digests = {name: submission_digest(path) for name, path in todo.items()}
        rest = {}
        for name, path in todo.items():  # graded by an earlier run's task: take it, submit nothing
            target = report_path(reports, name, digests[name])
            report = read_report(target)
            if name in again or not done(report):
                target.unlink(missing_ok=True)  # an earlier failure: this run's task writes anew
                rest[name] = path
            else:
                yield name, report
        if not rest:
            return
        names = sorted(rest)
        k = self.options.per_task
        chunks = [[(name, str(rest[name].resolve())) for name in names[i:i + k]] for i in range(0, len(names), k)]
        jobs = self._submit(chunks, reports, out)
        console.print(f"submitted job array {jobs[0].job_id.split('_')[0]}: {len(chunks)} task(s) of up to {k} "
                      f"submission(s); logs in {out / '.slurm' / 'logs'}")
        yield from self._watch(jobs, chunks, digests, reports, console)

    def _submit(self, chunks: list, reports: Path, out: Path) -> list:
        try:
            import submitit
        except ImportError:
            raise ExecutorError("--executor slurm needs submitit: pip install 'submitit>=1.5' "
                                "(it comes with the instructor extras)") from None
        check_accounting()
        executor = submitit.SlurmExecutor(folder=out / ".slurm" / "logs" / "%j")
        executor.update_parameters(**sbatch_parameters(self.options))
        task = GradeTask(str(reports), self.call_timeout, overlap=self.options.cpus_per_task >= 2, seed=self.seed,
                         secret=self.secret, stop_patience_s=self.stop_patience_s)
        try:
            self.jobs = executor.map_array(task, chunks)
        except Exception as exc:  # submitit raises its own errors with sbatch's message
            raise ExecutorError(refusal(exc, self.options)) from None
        return self.jobs

    def _watch(self, jobs: list, chunks: list, digests: dict[str, str], reports: Path,
               console: Console) -> Iterator[tuple[str, Outcome]]:
        waiting = {job.job_id: [name for name, _ in chunk] for job, chunk in zip(jobs, chunks)}
        by_id = {job.job_id: job for job in jobs}
        states = {job.job_id: "PENDING" for job in jobs}
        ended: dict[str, float] = {}  # job id: when it was first seen in a finished state
        requeued: set[str] = set()
        seen: dict[str, list[str]] = {job.job_id: [] for job in jobs}  # each job's states, in the order seen
        counts = {"graded": 0, "failed": 0}
        total = sum(len(names) for names in waiting.values())
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        checked = 0.0
        with Progress(*columns, console=console) as progress, _cancel_on_exit(by_id, waiting, console):
            bar = progress.add_task("slurm", total=total)
            while waiting:
                if time.monotonic() - checked >= self.state_every_s:
                    checked = time.monotonic()
                    states.update(self._states(jobs[0], list(waiting)))
                for job_id in list(waiting):
                    state = states[job_id]
                    if not seen[job_id] or seen[job_id][-1] != state:
                        seen[job_id].append(state)
                    if state in REQUEUED:
                        requeued.add(job_id)
                    # A requeue passes through a finished state for a moment (the preempted run ends, then
                    # the job is pending again): a task counts as ended only once seen so for FINISH_GRACE_S.
                    if state in FINISHED:
                        ended.setdefault(job_id, time.monotonic())
                    else:
                        ended.pop(job_id, None)
                    grace = max(FINISH_GRACE_S, 2 * self.state_every_s)
                    over = job_id in ended and time.monotonic() - ended[job_id] >= grace
                    for name in list(waiting[job_id]):
                        report = read_report(report_path(reports, name, digests[name]))
                        if report is None and not over:
                            continue
                        waiting[job_id].remove(name)
                        outcome = report if report is not None else self._why(by_id[job_id], state, seen[job_id])
                        counts["graded" if isinstance(outcome, GradeReport) and outcome.tests else "failed"] += 1
                        progress.advance(bar)
                        yield name, outcome
                    if not waiting[job_id]:
                        del waiting[job_id]
                pending = sum(len(n) for j, n in waiting.items() if states[j] not in ("RUNNING", "COMPLETING"))
                running = sum(len(n) for n in waiting.values()) - pending
                progress.update(bar, description=f"slurm: {pending} pending, {running} running, {counts['graded']} "
                                f"graded, {counts['failed']} failed, {len(requeued)} task(s) requeued")
                if waiting:
                    time.sleep(self.poll_s)

    @staticmethod
    def _states(any_job, job_ids: list[str]) -> dict[str, str]:
        """The Slurm state of each job id, one `sacct` call for all (submitit's watcher)."""
        watcher = any_job.watcher
        watcher.update()
        found = {}
        for job_id in job_ids:
            state = watcher.get_state(job_id, mode="cache").split()[0].upper()  # "CANCELLED by 0"
            found[job_id] = "PENDING" if state == "UNKNOWN" else state
        return found

    @staticmethod
    def _why(job, state: str, seen: list[str]) -> str:
        """Why a task that ended left this submission without a report."""
        reason = f"slurm task {job.job_id} ended {state} before this submission was graded"
        if len(seen) > 1:
            reason += f" (its states: {' > '.join(seen)})"
        if state == "FAILED":
            try:
                error = job.exception()
            except Exception as exc:  # the result file itself is missing or damaged
                error = exc
            if error is not None:
                reason += f": {last_error_line(str(error)) or type(error).__name__}"
        return f"{reason} (log: {job.paths.stderr})"


def last_error_line(text: str) -> str:
    """The line that names the error in submitit's account of a failed task: the last line of the traceback
    it puts between two dashed lines (the lines after those list the log files), or the text's last line."""
    lines = [line.strip() for line in text.strip().splitlines()]
    rules = [i for i, line in enumerate(lines) if line and set(line) == {"-"}]
    if len(rules) >= 2:
        lines = lines[rules[0] + 1:rules[-1]]
    return next((line for line in reversed(lines) if line), "")
