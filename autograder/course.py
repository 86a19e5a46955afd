"""The course file, `grading.toml`: what a course sets once, read with tomllib.

    [cluster]                  # how `autograder batch` grades; each key is also a command-line option,
    executor = "slurm"         # and an option given on the command line wins. "local" (threads) or "slurm"
    partition = "gpu"          # sbatch --partition
    account = "cs336"          # sbatch --account
    qos = "course"             # sbatch --qos
    gpus_per_task = 1          # sbatch --gpus-per-task: GPUs of each array task
    constraint = "h100"        # sbatch --constraint: one GPU model, so that speed tests compare like with like
    time = 60                  # minutes each array task may run (sbatch --time)
    per_task = 8               # submissions graded by one array task, one after the other
    max_parallel = 32          # array tasks running at once
    cpus_per_task = 2          # sbatch --cpus-per-task; with two or more, a task boots the next sandbox early
    mem = "32G"                # sbatch --mem
    setup = ["module load cuda/12.4"]   # shell lines each task runs before grading

Other top-level tables (e.g. `[assignments.<name>]` with due dates) belong to other readers and are
left alone here; an unknown key inside `[cluster]` is an error that names it.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

EXECUTORS = ("local", "slurm")
COURSE_FILE = "grading.toml"


class CourseError(Exception):
    """The course file cannot be used: it is not TOML, or a key or value of [cluster] is wrong."""


@dataclass(frozen=True)
class ClusterOptions:
    executor: str = "local"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gpus_per_task: int | None = None
    constraint: str | None = None
    time: int = 60
    per_task: int = 4
    max_parallel: int = 64
    cpus_per_task: int = 2
    mem: str | None = None
    setup: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise CourseError(f"executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        for name in ("time", "per_task", "max_parallel", "cpus_per_task"):
            _check_positive(name, getattr(self, name))
        if self.gpus_per_task is not None:
            _check_positive("gpus_per_task", self.gpus_per_task)

    def replace(self, **given) -> "ClusterOptions":
        """These options with those of `given` that are not None (the command line's) put in."""
        return dataclasses.replace(self, **{k: v for k, v in given.items() if v is not None})


def _check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CourseError(f"{name} must be a whole number of at least 1, got {value!r}")


def load_cluster(path: Path) -> ClusterOptions:
    """The [cluster] table of a course file (defaults where a key or the table is absent)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CourseError(f"cannot read the course file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CourseError(f"{path} is not valid TOML: {exc}") from None
    table = data.get("cluster", {})
    if not isinstance(table, dict):
        raise CourseError(f"{path}: 'cluster' must be a table ([cluster]), got {type(table).__name__}")
    known = {f.name: f.type for f in dataclasses.fields(ClusterOptions)}
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise CourseError(f"{path}: unknown key(s) in [cluster]: {', '.join(unknown)}; "
                          f"the keys are {', '.join(known)}")
    for key in ("executor", "partition", "account", "qos", "constraint", "mem"):
        if key in table and not isinstance(table[key], str):
            raise CourseError(f"{path}: [cluster] {key} must be a string, got {table[key]!r}")
    setup = table.get("setup", [])
    if not (isinstance(setup, list) and all(isinstance(line, str) for line in setup)):
        raise CourseError(f"{path}: [cluster] setup must be a list of shell lines (strings), got {setup!r}")
    try:
        return ClusterOptions(**{**table, "setup": tuple(setup)})
    except CourseError as exc:
        raise CourseError(f"{path}: [cluster] {exc}") from None
