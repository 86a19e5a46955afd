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

    [late_days]                # a budget of late days per student, for the assignments whose rule is "late_days"
    budget = 4                 # days each student may spend, over all those assignments (by due date)
    after = "zero"             # a day past the budget: "zero" (the assignment scores 0), or a fraction lost per day

    [assignments.resource_accounting]
    due = 2027-01-20T17:00:00-08:00    # ISO 8601 with its UTC offset (a TOML date-time, or a string)
    grace_minutes = 15         # submissions this late are on time (default 0)
    rule = "per_day"           # "per_day": `per_day` of the score lost per started day after the grace period;
    per_day = 0.1              # "capped": the same, never more than `cap`; "late_days": the student's budget
    cap = 0.3                  # first, then [late_days] after

    [grading]
    seed_secret = "a phrase of the course's"   # the randomised tests' seed of each submission is derived
                                               # from it and the submission's name (default: the name alone)

load_cluster reads [cluster], load_seed_secret [grading] and load_late the rest; each leaves the other's
tables alone. An unknown key, a due date without its offset or a fraction outside [0, 1] is an error that
names the key. check reads the whole file at once, as `make gradescope` does before it packages it.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

EXECUTORS = ("local", "slurm")
COURSE_FILE = "grading.toml"
TABLES = ("cluster", "late_days", "assignments", "grading")  # the tables of a course file


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


def _read(path: Path) -> dict:
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CourseError(f"cannot read the course file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CourseError(f"{path} is not valid TOML: {exc}") from None


def check(path: Path, known: list[str]) -> None:
    """Read the whole course file (its tables, [cluster], the late policy); a CourseError names what is wrong.
    `known`: the course's assignments, all of them (a section of another name is a misspelling)."""
    path = Path(path)
    unknown = sorted(set(_read(path)) - set(TABLES))
    if unknown:
        raise CourseError(f"{path}: unknown table or key {unknown[0]!r} at the top level; a course file holds "
                          "[cluster], [grading], [late_days] and [assignments.<name>] (autograder/cohort/course.py "
                          "shows each): rename or remove it")
    load_cluster(path)
    load_seed_secret(path)
    load_late(path, known)


def load_seed_secret(path: Path) -> str:
    """[grading] seed_secret: what the randomised tests' seeds are derived from with each submission's name
    (autograder.grading.client.seed_for), so that no student can compute another's inputs; "" when unset."""
    table = _read(Path(path)).get("grading", {})
    if not isinstance(table, dict):
        raise CourseError(f"{path}: 'grading' must be a table ([grading]), got {type(table).__name__}")
    unknown = sorted(set(table) - {"seed_secret"})
    if unknown:
        raise CourseError(f"{path}: unknown key(s) in [grading]: {', '.join(unknown)}; the key is seed_secret")
    secret = table.get("seed_secret", "")
    if not isinstance(secret, str):
        raise CourseError(f"{path}: [grading] seed_secret must be a string, got {type(secret).__name__}")
    return secret


def load_cluster(path: Path) -> ClusterOptions:
    """The [cluster] table of a course file (defaults where a key or the table is absent)."""
    path = Path(path)
    data = _read(path)
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


RULES = ("per_day", "capped", "late_days")
ASSIGNMENT_KEYS = ("due", "grace_minutes", "rule", "per_day", "cap")


@dataclass(frozen=True)
class AssignmentPolicy:
    """One assignment's due date and late rule (autograder.cohort.late applies it)."""

    due: datetime
    rule: str
    grace: timedelta = timedelta(0)
    per_day: float = 0.0  # the fraction of the score lost per started day after the grace period
    cap: float = 1.0  # at most this fraction is lost ("capped"; 1.0 otherwise)


@dataclass(frozen=True)
class LateDays:
    budget: int = 0
    after: str | float = "zero"  # past the budget: "zero", or a fraction lost per day


@dataclass(frozen=True)
class LatePolicy:
    assignments: dict[str, AssignmentPolicy]
    late_days: LateDays = LateDays()


def load_late(path: Path, known: list[str] | None = None) -> LatePolicy | None:
    """The late policy of a course file: its [assignments.<name>] tables and [late_days]; None when it has
    neither. `known` (the assignment names) makes a misspelt assignment an error."""
    path = Path(path)
    data = _read(path)
    tables, budget = data.get("assignments", {}), data.get("late_days")
    if not tables and budget is None:
        return None
    if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
        raise CourseError(f"{path}: 'assignments' must hold one table per assignment, e.g. "
                          "[assignments.resource_accounting] with due = 2027-01-20T17:00:00-08:00")
    unknown = sorted(set(tables) - set(known)) if known is not None else []
    if unknown:
        raise CourseError(f"{path}: [assignments.{unknown[0]}]: no such assignment; the assignments are "
                          f"{', '.join(known)}")
    policies = {name: _assignment(path, name, table) for name, table in tables.items()}
    late_days = _late_days(path, budget if budget is not None else {})
    if budget is None and any(p.rule == "late_days" for p in policies.values()):
        raise CourseError(f"{path}: rule = \"late_days\" needs a [late_days] table with the budget, e.g. "
                          "budget = 4 and after = \"zero\"")
    return LatePolicy(policies, late_days)


def _assignment(path: Path, name: str, table: dict) -> AssignmentPolicy:
    where = f"{path}: [assignments.{name}]"
    unknown = sorted(set(table) - set(ASSIGNMENT_KEYS))
    if unknown:
        raise CourseError(f"{where}: unknown key(s) {', '.join(unknown)}; the keys are {', '.join(ASSIGNMENT_KEYS)}")
    if "due" not in table:
        raise CourseError(f"{where}: due is missing: add e.g. due = 2027-01-20T17:00:00-08:00 (with its UTC offset)")
    due = parse_time(table["due"], f"{where} due")
    rule = table.get("rule", "per_day")
    if rule not in RULES:
        raise CourseError(f"{where}: rule must be one of {', '.join(RULES)}, got {rule!r}")
    grace = table.get("grace_minutes", 0)
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or grace < 0:
        raise CourseError(f"{where}: grace_minutes must be a number of minutes, 0 or more, got {grace!r}")
    needed = {"per_day": ("per_day",), "capped": ("per_day", "cap"), "late_days": ()}[rule]
    allowed = {"per_day": ("per_day", "cap"), "capped": ("per_day", "cap"), "late_days": ()}[rule]
    for key in needed:
        if key not in table:
            raise CourseError(f"{where}: rule = {rule!r} needs {key} (a fraction of the score, e.g. {key} = 0.1)")
    for key in ("per_day", "cap"):
        if key in table and key not in allowed:
            raise CourseError(f"{where}: {key} does not apply to rule = {rule!r} (late days follow [late_days]); "
                              "remove it")
        if key in table:
            _check_fraction(f"{where} {key}", table[key])
    return AssignmentPolicy(due=due, rule=rule, grace=timedelta(minutes=grace), per_day=float(table.get("per_day", 0)),
                            cap=float(table.get("cap", 1.0)))


def _late_days(path: Path, table) -> LateDays:
    where = f"{path}: [late_days]"
    if not isinstance(table, dict):
        raise CourseError(f"{where} must be a table, got {table!r}")
    unknown = sorted(set(table) - {"budget", "after"})
    if unknown:
        raise CourseError(f"{where}: unknown key(s) {', '.join(unknown)}; the keys are budget, after")
    budget = table.get("budget", 0)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise CourseError(f"{where}: budget must be a whole number of days, 0 or more, got {budget!r}")
    after = table.get("after", "zero")
    if after != "zero":
        _check_fraction(f"{where} after (\"zero\" or a fraction lost per day)", after)
        after = float(after)
    return LateDays(budget, after)


def _check_fraction(where: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise CourseError(f"{where} must be a fraction of the score between 0 and 1 (0.1 for 10%), got {value!r}")


def parse_time(value, where: str) -> datetime:
    """An ISO 8601 date-time with its UTC offset (a TOML date-time, or a string), else a CourseError."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise CourseError(f"{where}: {value!r} is not an ISO 8601 date-time; write e.g. "
                              "2027-01-20T17:00:00-08:00") from None
    if isinstance(value, date) and not isinstance(value, datetime):
        raise CourseError(f"{where}: {value.isoformat()} is not a date-time (no hour, no UTC offset); write e.g. "
                          f"{value.isoformat()}T17:00:00-08:00")
    if not isinstance(value, datetime):
        raise CourseError(f"{where}: {value!r} is not a date-time; write e.g. 2027-01-20T17:00:00-08:00")
    if value.tzinfo is None or value.utcoffset() is None:
        raise CourseError(f"{where}: {value.isoformat()} has no UTC offset, so its instant is unknown; add it, "
                          "e.g. -08:00, +01:00 or Z")
    return value
