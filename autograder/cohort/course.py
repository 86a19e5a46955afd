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
    last_accepted = 2027-01-27T17:00:00-08:00   # no submission counts after it (nor after the answers' release,
                               # when there is no last_accepted): one later is recorded "too late" and scores 0;
                               # the answers may not be released before it (an extension moves it for its student)

    [grading]
    seed_secret = "a phrase of the course's"   # the randomised tests' seed of each submission is derived
                                               # from it and the submission's name (default: the name alone)

    [roster]                   # the students (autograder.cohort.roster matches the submissions to them)
    file = "roster.csv"        # a CSV beside the course file: id,name,email,section (optional: login,
                               # submission); or inline: students = [{ id = "s001", name = "...", ... }]

    [[extensions]]             # one student's later due date for one assignment; the late policy uses it
    student = "s002"           # a roster id (the submission's name where there is no roster)
    assignment = "resource_accounting"
    due = 2027-01-25T17:00:00-08:00
    reason = "medical note of 2027-01-18"   # every extension and override needs its reason (the audit keeps it)

    [[overrides]]              # one student's assignment: its score set by hand, or excused (not counted)
    student = "s003"
    assignment = "resource_accounting"
    score = 14.5               # the score after the late policy; or excused = true
    reason = "regraded by hand: the reference's tolerance was too tight"

    [export]
    canvas_ids = { resource_accounting = 4711 }   # Canvas's assignment ids: the column "resource_accounting (4711)"

    [answers]                  # from this date on, students get the answer keys (autograder/cohort/answers.py);
    release = 2027-01-27T17:00:00-08:00   # an assignment's own: answers_release in its [assignments.<name>]
                               # section. Without either, its answers are never released.

load_cluster reads [cluster], load_seed_secret [grading], load_late the late policy, load_roster [roster],
load_adjustments [[extensions]] and [[overrides]], load_canvas_ids [export]; each leaves the others'
tables alone. An unknown key, a due date without its offset or a fraction outside [0, 1] is an error that
names the key. check reads the whole file at once, as `make gradescope` does before it packages it.
"""

from __future__ import annotations

import csv
import dataclasses
import tomllib
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

EXECUTORS = ("local", "slurm")
COURSE_FILE = "grading.toml"
TABLES = ("cluster", "late_days", "assignments", "grading", "roster", "extensions", "overrides",
          "export", "answers")  # the tables of a course file


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
                          "[cluster], [grading], [late_days], [assignments.<name>], [roster], [[extensions]], [[overrides]], "
                          "[export] and [answers] (autograder/cohort/course.py "
                          "shows each): rename or remove it")
    load_cluster(path)
    load_seed_secret(path)
    load_late(path, known)
    load_roster(path)
    load_adjustments(path, known)
    load_canvas_ids(path, known)
    load_answers_release(path, known)


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


def load_answers_release(path: Path, known: list[str]) -> dict[str, datetime]:
    """{assignment: when its answers reach students}: its section's answers_release, else [answers] release;
    an assignment of `known` with neither is left out (never released). A release before the assignment's
    due date, or before one of its [[extensions]], is an error: its answers would reach students still at work."""
    data = _read(Path(path))
    table = data.get("answers", {})
    if not isinstance(table, dict):
        raise CourseError(f"{path}: 'answers' must be a table ([answers]), got {type(table).__name__}")
    unknown = sorted(set(table) - {"release"})
    if unknown:
        raise CourseError(f"{path}: unknown key(s) in [answers]: {', '.join(unknown)}; the key is release")
    default = parse_time(table["release"], f"{path}: [answers] release") if "release" in table else None
    sections = data.get("assignments", {})
    releases = {}
    for name in known:
        section = sections.get(name) if isinstance(sections, dict) else None
        section = section if isinstance(section, dict) else {}
        where = f"{path}: [assignments.{name}] answers_release" if "answers_release" in section else \
            f"{path}: [answers] release"
        release = parse_time(section["answers_release"], where) if "answers_release" in section else default
        if release is None:
            continue
        for due, whose in _due_dates(path, data, name):
            if release < due:
                raise CourseError(f"{where}: {release.isoformat()} is before {whose} due date {due.isoformat()}, so "
                                  f"{name}'s answers would reach students still working on it: release them after "
                                  f"its last due date (answers_release in [assignments.{name}] sets its own)")
        last = section.get("last_accepted")
        if last is not None and release < parse_time(last, f"{path}: [assignments.{name}] last_accepted"):
            raise CourseError(f"{where}: {release.isoformat()} is before {name}'s last accepted date "
                              f"{parse_time(last, 'last_accepted').isoformat()}, so late work still accepted could be "
                              f"written with the answers in hand: release them at or after last_accepted, or move "
                              f"last_accepted in [assignments.{name}] to the release date")
        releases[name] = release
    return releases


def _due_dates(path: Path, data: dict, name: str) -> list[tuple[datetime, str]]:
    """(due date, whose) of an assignment: its section's due, and each of its [[extensions]]' due."""
    section = data.get("assignments", {}).get(name) if isinstance(data.get("assignments"), dict) else None
    dates = []
    if isinstance(section, dict) and "due" in section:
        dates.append((parse_time(section["due"], f"{path}: [assignments.{name}] due"), f"{name}'s"))
    extensions = data.get("extensions", [])
    for entry in extensions if isinstance(extensions, list) else []:
        if isinstance(entry, dict) and entry.get("assignment") == name and "due" in entry:
            student = entry.get("student", "?")
            dates.append((parse_time(entry["due"], f"{path}: [[extensions]] of {student} due"), f"{student}'s extended"))
    return dates


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
ASSIGNMENT_KEYS = ("due", "grace_minutes", "rule", "per_day", "cap", "answers_release", "last_accepted")


@dataclass(frozen=True)
class AssignmentPolicy:
    """One assignment's due date and late rule (autograder.cohort.late applies it)."""

    due: datetime
    rule: str
    grace: timedelta = timedelta(0)
    per_day: float = 0.0  # the fraction of the score lost per started day after the grace period
    cap: float = 1.0  # at most this fraction is lost ("capped"; 1.0 otherwise)
    # No submission after it counts: its last_accepted, else the date its answers are released (None: no limit).
    last_accepted: datetime | None = None
    last_accepted_why: str = ""  # "the last accepted date" or "the answers' release"


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
    release = data.get("answers", {}).get("release") if isinstance(data.get("answers"), dict) else None
    policies = {name: _assignment(path, name, table, release) for name, table in tables.items()}
    late_days = _late_days(path, budget if budget is not None else {})
    if budget is None and any(p.rule == "late_days" for p in policies.values()):
        raise CourseError(f"{path}: rule = \"late_days\" needs a [late_days] table with the budget, e.g. "
                          "budget = 4 and after = \"zero\"")
    return LatePolicy(policies, late_days)


def _assignment(path: Path, name: str, table: dict, release=None) -> AssignmentPolicy:
    """One [assignments.<name>] section; `release`: [answers] release, the answers' date where the section has none."""
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
    last, why = None, ""
    if "last_accepted" in table:
        last, why = parse_time(table["last_accepted"], f"{where} last_accepted"), "the last accepted date"
        if last < due:
            raise CourseError(f"{where}: last_accepted {last.isoformat()} is before the due date {due.isoformat()}: "
                              "it is the last moment a late submission still counts, so set it at or after the due "
                              "date")
    elif "answers_release" in table or release is not None:
        answers = table.get("answers_release", release)
        last, why = parse_time(answers, f"{where} answers_release" if "answers_release" in table else
                               f"{path}: [answers] release"), "the answers' release"
    return AssignmentPolicy(due=due, rule=rule, grace=timedelta(minutes=grace), per_day=float(table.get("per_day", 0)),
                            cap=float(table.get("cap", 1.0)), last_accepted=last, last_accepted_why=why)


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


# ---- the roster, extensions and overrides (autograder.cohort.roster matches and applies them) ---------------

ROSTER_COLUMNS = ("id", "name", "email", "section")  # every roster has them; email and section may be empty
ROSTER_OPTIONAL = ("login", "submission")


@dataclass(frozen=True)
class Student:
    id: str  # the course's student id (Canvas's SIS User ID)
    name: str
    email: str = ""
    section: str = ""
    login: str = ""  # Canvas's SIS Login ID, where it is not the email
    submission: str = ""  # the name of the student's submission, where it is neither the id, the email nor the name


def load_roster(path: Path) -> tuple[Student, ...] | None:
    """[roster]: its students, from the CSV its `file` names (relative to the course file's folder) or from
    its inline `students`; None when the course file has no roster."""
    path = Path(path)
    table = _read(path).get("roster")
    if table is None:
        return None
    where = f"{path}: [roster]"
    if not isinstance(table, dict):
        raise CourseError(f"{where} must be a table with file = \"roster.csv\" (or students), got {table!r}")
    unknown = sorted(set(table) - {"file", "students"})
    if unknown:
        raise CourseError(f"{where}: unknown key(s) {', '.join(unknown)}; the keys are file and students")
    if ("file" in table) == ("students" in table):
        raise CourseError(f"{where}: give either file = \"roster.csv\" (a CSV with the columns "
                          f"{','.join(ROSTER_COLUMNS)}) or students = [{{ id = \"s001\", name = \"...\", email = "
                          "\"...\", section = \"...\" }], one of the two")
    if "file" in table:
        if not isinstance(table["file"], str) or not table["file"].strip():
            raise CourseError(f"{where}: file must name the roster's CSV, e.g. file = \"roster.csv\"")
        return _students(_roster_csv(path.parent / table["file"]), where)
    students = table["students"]
    if not isinstance(students, list) or not all(isinstance(s, dict) for s in students):
        raise CourseError(f"{where}: students must be a list of tables, e.g. [{{ id = \"s001\", name = \"...\" }}]")
    return _students([(f"{where} students[{i}]", s) for i, s in enumerate(students)], where)


def _roster_csv(path: Path) -> list[tuple[str, dict]]:
    """(where, row) for each non-empty line of a roster CSV, its header checked."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = [cell.strip().lower() for cell in next(reader, [])]
            missing = [c for c in ROSTER_COLUMNS if c not in header]
            unknown = [c for c in header if c not in ROSTER_COLUMNS + ROSTER_OPTIONAL]
            if missing or unknown or len(set(header)) != len(header):
                raise CourseError(f"{path}: the first line must name the columns {','.join(ROSTER_COLUMNS)} (and "
                                  f"optionally {', '.join(ROSTER_OPTIONAL)}), each once; found {','.join(header) or 'nothing'}"
                                  + (f" (missing {', '.join(missing)})" if missing else "")
                                  + (f" (unknown {', '.join(unknown)}: rename or remove it)" if unknown else ""))
            rows = []
            for cells in reader:
                where = f"{path} line {reader.line_num}"
                if not any(cell.strip() for cell in cells):
                    continue
                if len(cells) != len(header):
                    raise CourseError(f"{where}: {len(cells)} cells where the header has {len(header)}: a name with a "
                                      "comma needs double quotes around it")
                rows.append((where, dict(zip(header, cells))))
            return rows
    except OSError as exc:
        raise CourseError(f"cannot read the roster {path}: {exc.strerror}; [roster] file names a CSV, relative to "
                          "the course file's folder") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise CourseError(f"{path} is not a CSV file in UTF-8 ({exc}): save the roster as CSV UTF-8") from None


def _students(rows: list[tuple[str, dict]], where: str) -> tuple[Student, ...]:
    students, first = [], {}
    for at, row in rows:
        missing = [c for c in ROSTER_COLUMNS if c not in row]
        unknown = sorted(set(row) - set(ROSTER_COLUMNS + ROSTER_OPTIONAL))
        if missing or unknown:
            raise CourseError(f"{at}: a student has the keys {', '.join(ROSTER_COLUMNS)} (and optionally "
                              f"{', '.join(ROSTER_OPTIONAL)}); " + (f"{', '.join(missing)} missing" if missing else
                                                                    f"unknown {', '.join(unknown)}"))
        wrong = [key for key, value in row.items() if not isinstance(value, str)]
        if wrong:
            raise CourseError(f"{at}: {wrong[0]} must be a string (e.g. id = \"1234\"), got {row[wrong[0]]!r}")
        values = {key: value.strip() for key, value in row.items()}
        for key in ("id", "name"):
            if not values[key]:
                raise CourseError(f"{at}: the student's {key} is empty")
        if values["id"] in first:
            raise CourseError(f"{at}: student id {values['id']!r} again (first at {first[values['id']]}): one row "
                              "per student")
        first[values["id"]] = at
        students.append(Student(**values))
    if not students:
        raise CourseError(f"{where}: the roster has no students")
    return tuple(students)


@dataclass(frozen=True)
class Extension:
    student: str  # a roster id (a submission's name where there is no roster)
    assignment: str
    due: datetime  # the student's own due date: the late policy counts from it
    reason: str


@dataclass(frozen=True)
class Override:
    student: str
    assignment: str
    score: float | None  # the assignment's score after the late policy; None: excused (it does not count)
    reason: str

    @property
    def excused(self) -> bool:
        return self.score is None


@dataclass(frozen=True)
class Adjustments:
    extensions: tuple[Extension, ...] = ()
    overrides: tuple[Override, ...] = ()


ADJUSTMENT_KEYS = {"extensions": ("student", "assignment", "due", "reason"),
                   "overrides": ("student", "assignment", "score", "excused", "reason")}


def load_adjustments(path: Path, known: list[str] | None = None) -> Adjustments:
    """[[extensions]] and [[overrides]]. Each names a student (a roster id where the course file has a
    roster), an assignment and the reason, once per table. An extension's due date comes after the
    assignment's own ([assignments.<name>]); an override gives a score (0 or more) or excused = true."""
    path = Path(path)
    data = _read(path)
    if "extensions" not in data and "overrides" not in data:
        return Adjustments()
    roster = load_roster(path)
    ids = {s.id for s in roster} if roster else None
    policy = load_late(path, known)
    dues = policy.assignments if policy else {}
    return Adjustments(tuple(_extension(where, e, dues) for where, e in _entries(path, data, "extensions", known, ids)),
                       tuple(_override(where, e) for where, e in _entries(path, data, "overrides", known, ids)))


def _entries(path: Path, data: dict, table: str, known, ids) -> list[tuple[str, dict]]:
    entries = data.get(table, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise CourseError(f"{path}: {table} must be an array of tables: write each as [[{table}]] with student = "
                          "\"s001\", assignment = \"resource_accounting\", ... and reason = \"...\"")
    found, first = [], {}
    for number, entry in enumerate(entries, start=1):
        where = f"{path}: [[{table}]] number {number}"
        unknown = sorted(set(entry) - set(ADJUSTMENT_KEYS[table]))
        if unknown:
            raise CourseError(f"{where}: unknown key(s) {', '.join(unknown)}; the keys are "
                              f"{', '.join(ADJUSTMENT_KEYS[table])}")
        for key in ("student", "assignment", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                why = " (why: the gradebook's audit keeps it)" if key == "reason" else ""
                raise CourseError(f"{where}: {key} is missing or empty: every entry needs its {key}{why}, "
                                  f"e.g. {key} = \"...\"")
        student, assignment = entry["student"].strip(), entry["assignment"].strip()
        where += f" ({student}, {assignment})"
        if ids is not None and student not in ids:
            raise CourseError(f"{where}: {student!r} is no student id of the [roster]: use the id of the student's row")
        if known is not None and assignment not in known:
            raise CourseError(f"{where}: no assignment {assignment!r}; the assignments are {', '.join(known)}")
        if (student, assignment) in first:
            raise CourseError(f"{where}: the same student and assignment as number {first[student, assignment]}: "
                              "keep one entry")
        first[student, assignment] = number
        found.append((where, {**entry, "student": student, "assignment": assignment, "reason": entry["reason"].strip()}))
    return found


def _extension(where: str, entry: dict, dues: dict[str, AssignmentPolicy]) -> Extension:
    name = entry["assignment"]
    if "due" not in entry:
        raise CourseError(f"{where}: due is missing: the student's due date, e.g. due = 2027-01-25T17:00:00-08:00")
    if name not in dues:
        raise CourseError(f"{where}: the course file has no due date of {name} to extend: add "
                          f"[assignments.{name}] with due = ..., or remove the extension")
    due = parse_time(entry["due"], f"{where} due")
    if due <= dues[name].due:
        raise CourseError(f"{where}: due {due.isoformat()} is not after the assignment's due date "
                          f"{dues[name].due.isoformat()}: an extension gives more time")
    return Extension(entry["student"], name, due, entry["reason"])


def _override(where: str, entry: dict) -> Override:
    if ("score" in entry) == ("excused" in entry):
        raise CourseError(f"{where}: give either score = 14.5 (the assignment's score after the late policy) or "
                          "excused = true")
    if "excused" in entry:
        if entry["excused"] is not True:
            raise CourseError(f"{where}: excused must be true (remove the entry to count the assignment), got "
                              f"{entry['excused']!r}")
        return Override(entry["student"], entry["assignment"], None, entry["reason"])
    score = entry["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score < float("inf"):
        raise CourseError(f"{where}: score must be a number of points, 0 or more, got {score!r}")
    return Override(entry["student"], entry["assignment"], float(score), entry["reason"])


def load_canvas_ids(path: Path, known: list[str] | None = None) -> dict[str, int]:
    """[export] canvas_ids: {assignment: Canvas's id of it} (the Canvas export's columns are then
    "<assignment> (<id>)", which Canvas matches by id); {} where the course file gives none."""
    path = Path(path)
    table = _read(path).get("export", {})
    where = f"{path}: [export]"
    if not isinstance(table, dict) or sorted(set(table) - {"canvas_ids"}):
        raise CourseError(f"{where} holds one key, canvas_ids, e.g. canvas_ids = {{ resource_accounting = 4711 }}; "
                          f"got {table!r}")
    ids = table.get("canvas_ids", {})
    if not isinstance(ids, dict):
        raise CourseError(f"{where} canvas_ids must be a table, e.g. canvas_ids = {{ resource_accounting = 4711 }}")
    for name, value in ids.items():
        if known is not None and name not in known:
            raise CourseError(f"{where} canvas_ids: no assignment {name!r}; the assignments are {', '.join(known)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CourseError(f"{where} canvas_ids.{name} must be Canvas's id of the assignment, the number in its "
                              f"address (.../assignments/4711), got {value!r}")
    return dict(ids)
