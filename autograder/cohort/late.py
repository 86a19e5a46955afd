"""Late policy: days late from trusted submission times, and the penalised scores beside the raw ones.

    policy = load_late(Path("grading.toml"))                  # autograder.cohort.course
    times = read_times(Path("times.csv"))                      # or a folder of GitHub push events
    entries, warnings = assess(policy, scores, times)          # scores: {student: {assignment: (score, max)}}

Days late count from the end of the grace period, each started day a whole day: one minute inside
the grace period is on time, one minute after it is one day late. A submission after the assignment's last
accepted date (its `last_accepted`, else the answers' release: autograder.cohort.course; for a student with an
extension, never before their extended due date) is recorded "too late": it scores 0, and the batch says so. Rules (autograder.cohort.course):
"per_day" loses `per_day` of the score per day (never below zero), "capped" the same up to `cap`, and
"late_days" spends the student's budget first, in the order of the assignments' due dates, then
either zeroes the assignment or loses [late_days] `after` per day past the budget.

Submission times come from the trusted side only, never from a file inside the submission: a CSV
the instructor exports (student,time[,assignment]), the push events GitHub recorded (a folder of
<student>.json: a push event payload, whose repository.pushed_at is GitHub's clock, or the list the
REST events API returns, whose PushEvent created_at is too; the commit's own timestamp is the
committer's clock and is never used), or Gradescope's submission_metadata.json (its created_at, and
the student's own due date, which includes an extension). A student with no time is treated as on
time, with a warning that names them.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from rich.table import Table
from rich.text import Text

from autograder.cohort.course import AssignmentPolicy, CourseError, LatePolicy, parse_time
from autograder.report.parts import after_penalty, parts_of
from autograder.report.text import clean, points, rounded

DAY = timedelta(days=1)
ANY = ""  # the assignment of a time that holds for every assignment of the student's submission
MARK_BEGIN, MARK_END = "<!-- late policy -->", "<!-- /late policy -->"
ADJUSTED_BEGIN, ADJUSTED_END = "<!-- set by the course staff -->", "<!-- /set by the course staff -->"

Times = dict[tuple[str, str], datetime]  # (student, assignment or ANY) -> when the submission arrived


class LateError(CourseError):
    """The submission times cannot be read: the message names the file, the line and what to do."""


@dataclass(frozen=True)
class Lateness:
    student: str
    assignment: str
    submitted: datetime | None
    due: datetime
    days_late: int
    late_days_used: int
    penalty: float  # the fraction of the score removed
    score: float
    max_score: float
    note: str

    @property
    def penalised(self) -> float:
        return after_penalty(self.score, self.penalty)

    @classmethod
    def from_row(cls, row: dict) -> "Lateness":
        """An entry from the gradebook's late rows (Gradebook.late(): the current raw score)."""
        submitted = datetime.fromisoformat(row["submitted_at"]) if row["submitted_at"] else None
        return cls(row["submission"], row["assignment"], submitted, datetime.fromisoformat(row["due"]),
                   row["days_late"], row["late_days_used"], row["penalty"], row["score"], row["max_score"], row["note"])


def days_late(submitted: datetime, policy: AssignmentPolicy) -> int:
    """Started days after the grace period (0 when on time)."""
    late = submitted - policy.due - policy.grace
    return 0 if late <= timedelta(0) else math.ceil(late / DAY)


def assess(policy: LatePolicy, scores: dict[str, dict[str, tuple[float, float]]], times: Times,
           extended: dict[tuple[str, str], datetime] | None = None) -> tuple[list[Lateness], list[str]]:
    """Each student's lateness for each assignment the policy covers; and warnings (students with no time).
    `extended`: {(student, assignment): the student's own due date} (the course file's extensions)."""
    entries, warnings = [], []
    for student in sorted(scores):
        budget = policy.late_days.budget
        dated = sorted((p.due, name) for name, p in policy.assignments.items() if name in scores[student])
        for _, name in dated:  # in the order of due dates: late days are spent on the earliest first
            own = (extended or {}).get((student, name))
            rule = dataclasses.replace(policy.assignments[name], due=own) if own else policy.assignments[name]
            extension = " (due date extended)" if own else ""
            score, max_score = scores[student][name]
            submitted = times.get((student, name), times.get((student, ANY)))
            if submitted is None:
                warnings.append(f"{student}: no submission time for {name}: treated as on time")
                entries.append(Lateness(student, name, None, rule.due, 0, 0, 0.0, score, max_score,
                                        "no submission time: treated as on time" + extension))
                continue
            late = days_late(submitted, rule)
            used, penalty, note = _penalty(rule, late, budget, policy.late_days.after)
            last = last_accepted(rule, own)
            if last is not None and submitted > last:
                used, penalty = 0, 1.0
                note = (f"too late: submitted {_when(submitted)}, after {rule.last_accepted_why} {_when(last)}; "
                        "not counted (0 points)")
                warnings.append(f"{student}: {name} {note}")
            budget -= used
            entries.append(Lateness(student, name, submitted, rule.due, late, used, penalty, score, max_score,
                                    note + extension))
    return entries, warnings


def last_accepted(rule: AssignmentPolicy, extended: datetime | None = None) -> datetime | None:
    """The last moment a student's submission counts: the assignment's last accepted date, never before their
    own extended due date (and its grace period); None: no limit."""
    if rule.last_accepted is None:
        return None
    return max(rule.last_accepted, extended + rule.grace) if extended else rule.last_accepted


def _penalty(rule: AssignmentPolicy, late: int, budget: int, after) -> tuple[int, float, str]:
    """(late days spent, fraction removed, what happened in words)."""
    if late == 0:
        return 0, 0.0, "on time"
    days = f"{late} day{'s' * (late != 1)} late"
    if rule.rule != "late_days":
        penalty = min(rule.cap, rule.per_day * late, 1.0)
        capped = " (capped)" if penalty < min(rule.per_day * late, 1.0) else ""
        return 0, penalty, f"{days}: {penalty:.0%} off{capped}"
    used = min(late, budget)
    over = late - used
    if over == 0:
        return used, 0.0, f"{days}: {used} late day{'s' * (used != 1)} spent"
    penalty = 1.0 if after == "zero" else min(1.0, after * over)
    return used, penalty, f"{days}: {used} late day(s) spent, the rest of the budget; {over} past it: {penalty:.0%} off"


def read_times(source: Path) -> Times:
    """Submission times from a CSV file, or from a folder of GitHub push events (<student>.json)."""
    source = Path(source)
    if source.is_dir():
        return read_github_events(source)
    if not source.is_file():
        raise LateError(f"{source} does not exist: give the CSV of submission times (student,time) or the folder "
                        "of GitHub push events (<student>.json)")
    return read_times_csv(source)


def read_times_csv(path: Path) -> Times:
    """student,time[,assignment]: a time with its UTC offset; without assignment it holds for them all."""
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        header = [h.strip() for h in reader.fieldnames or []]
        if not {"student", "time"} <= set(header):
            raise LateError(f"{path}: the first line must name the columns student,time (and optionally "
                            f"assignment); found {','.join(header) or 'nothing'}")
        times: Times = {}
        for line, row in enumerate(reader, start=2):
            row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
            student, assignment = row["student"], row.get("assignment", ANY)
            if not student:
                raise LateError(f"{path} line {line}: the student is empty")
            try:
                when = parse_time(row["time"], f"{path} line {line}")
            except CourseError as exc:
                raise LateError(str(exc)) from None
            if (student, assignment) in times:
                which = student + (f" and {assignment}" if assignment else "")
                raise LateError(f"{path} line {line}: a second time for {which}: keep one line (the last submission)")
            times[(student, assignment)] = when
    return times


def read_github_events(folder: Path) -> Times:
    """<student>.json per student: a push event payload (repository.pushed_at, GitHub's clock), or the
    repository's events from the REST API (the latest PushEvent's created_at, GitHub's clock too)."""
    times: Times = {}
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeError, json.JSONDecodeError) as exc:
            raise LateError(f"{path}: not a JSON file ({exc}); save GitHub's push event payload as it came") from None
        times[(path.stem, ANY)] = _pushed_at(path, data)
    if not times:
        raise LateError(f"{folder} holds no <student>.json push events: save each student repository's push event "
                        "(or its events from the REST API) there")
    return times


def _pushed_at(path: Path, data) -> datetime:
    if isinstance(data, list):  # GET /repos/{owner}/{repo}/events: newest first
        pushes = [e.get("created_at") for e in data if isinstance(e, dict) and e.get("type") == "PushEvent"]
        if not pushes:
            raise LateError(f"{path}: no PushEvent among the repository's events")
        return _time(path, "created_at", max(parse_time(t, f"{path} created_at") for t in pushes if t is not None))
    pushed = data.get("repository", {}).get("pushed_at") if isinstance(data, dict) else None
    if isinstance(pushed, (int, float)) and not isinstance(pushed, bool):
        return datetime.fromtimestamp(pushed, timezone.utc)
    if isinstance(pushed, str):
        return _time(path, "repository.pushed_at", pushed)
    raise LateError(f"{path}: no repository.pushed_at: give the push event payload GitHub sent (not the commit: "
                    "a commit's timestamp is set by whoever commits)")


def _time(path: Path, key: str, value) -> datetime:
    try:
        return parse_time(value, f"{path} {key}")
    except CourseError as exc:
        raise LateError(str(exc)) from None


def read_gradescope_metadata(path: Path) -> tuple[datetime, datetime | None]:
    """(when the submission was made, the student's own due date or None) from Gradescope's
    submission_metadata.json: created_at, and users[0].assignment.due_date (an extension shows there)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeError, json.JSONDecodeError) as exc:
        raise LateError(f"{path}: cannot read Gradescope's submission metadata ({exc})") from None
    if not isinstance(data, dict) or "created_at" not in data:
        raise LateError(f"{path}: no created_at: is this Gradescope's submission_metadata.json?")
    created = _time(path, "created_at", data["created_at"])
    users = data.get("users") or [{}]
    due = (users[0].get("assignment") or {}).get("due_date") if isinstance(users[0], dict) else None
    due = due or (data.get("assignment") or {}).get("due_date")
    return created, (_time(path, "due_date", due) if due else None)


def table(late: dict[str, dict[str, dict]]) -> Table:
    """The late or undated submissions from the gradebook (Gradebook.late()), raw and penalised."""
    view = Table(title="late policy (late or undated submissions)", title_justify="left")
    view.add_column("submission", overflow="fold")
    view.add_column("assignment", overflow="fold")
    for name in ("days late", "late days", "raw", "penalised"):
        view.add_column(name, justify="right", no_wrap=True)
    view.add_column("note", overflow="fold")
    for student, assignments in late.items():
        for name, row in assignments.items():
            if row["days_late"] or row["submitted_at"] is None:
                view.add_row(Text(clean(student)), Text(name), str(row["days_late"]), str(row["late_days_used"]),
                             f"{points(row['score'])}/{points(row['max_score'])}",
                             f"{points(row['penalised'])}/{points(row['max_score'])}", Text(row["note"]))
    return view


def apply(book, policy: LatePolicy, times: Times,
          extended: dict[tuple[str, str], datetime] | None = None) -> tuple[list[Lateness], list[str]]:
    """Assess every graded submission of the gradebook and store the outcome there (replacing the last one);
    return the entries and the warnings. `extended`: as assess() takes it, by submission. The files that show
    it (feedback.md, results.json, grades.csv) are written from the gradebook afterwards
    (autograder.cohort.publish)."""
    scores = {row["name"]: {a: (p.score, p.maximum) for a, p in book.parts(row["name"]).items()}
              for row in book.rows() if row["status"] == "graded"}
    entries, warnings = assess(policy, scores, times, extended)
    spends = any(rule.rule == "late_days" for rule in policy.assignments.values())
    book.record_late(entries, policy.late_days.budget if spends else None)
    unknown = sorted({s for s, _ in times} - set(scores))
    if unknown:
        warnings.append(f"times given for {', '.join(unknown)}, who have no graded submission")
    return entries, warnings


def apply_to_submission(report, out: Path, policy: LatePolicy | None, metadata: Path,
                        extended: dict[str, datetime] | None = None,
                        overrides: dict[str, float | None] | None = None) -> list[str]:
    """Gradescope's channel: apply the policy to one graded submission with the times of Gradescope's
    submission_metadata.json (the student's own due date, an extension included, replaces the course
    file's; where `extended` {assignment: due} holds the course file's extension for the student, the later
    of the two counts); results.json's score becomes the penalised one and says so, feedback.md shows both.
    Late days are not spent here (one submission cannot see the others): the course's batch counts them.
    Then `overrides` {assignment: the score the course file sets, None where it excuses the assignment}
    (mark_adjusted). Returns what to tell the grader's log; a metadata file that cannot be read leaves the
    reports raw."""
    from autograder.report.gradescope import with_late

    try:
        submitted, due = read_gradescope_metadata(metadata)
    except LateError as exc:
        return [f"{exc}; the scores are left without the late policy"]
    entries = []
    for name, tests in report.by_assignment().items():
        if policy is None or name not in policy.assignments:
            continue
        own, base = (extended or {}).get(name), due or policy.assignments[name].due
        rule = dataclasses.replace(policy.assignments[name], due=max(base, own) if own else base)
        late = days_late(submitted, rule)
        if rule.rule == "late_days":
            used, penalty, note = 0, 0.0, "on time" if not late else (
                f"{late} day{'s' * (late != 1)} late: late days are counted over all assignments by the course's "
                "gradebook, not here")
        else:
            used, penalty, note = _penalty(rule, late, 0, "zero")
        last = last_accepted(rule, own)
        if last is not None and submitted > last:
            used, penalty = 0, 1.0
            note = (f"too late: submitted {_when(submitted)}, after {rule.last_accepted_why} {_when(last)}; not "
                    "counted (0 points)")
        parts = parts_of(tests)
        extension = " (due date extended)" if own and own > base else ""
        entries.append(Lateness(report.submission, name, submitted, rule.due, late, used, penalty,
                                parts.score, parts.maximum, note + extension))
    lines = [line.removeprefix("- ").replace("**", "") for line in feedback_lines(entries)]
    if entries:
        results = Path(out) / "results.json"
        deducted = sum(e.score - e.penalised for e in entries)
        results.write_text(json.dumps(with_late(json.loads(results.read_text()), lines, deducted), indent=2) + "\n")
        mark_feedback(Path(out) / "feedback.md", entries)
    penalised, adjusted = {e.assignment: e.penalised for e in entries}, {}
    for name, tests in report.by_assignment().items():
        if name in (overrides or {}):
            parts = parts_of(tests)
            adjusted[name] = (overrides[name], penalised.get(name, rounded(parts.score)), rounded(parts.maximum))
    return lines + mark_adjusted(Path(out), adjusted)


def _when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="minutes") if moment else "-"


def feedback_lines(entries: list[Lateness]) -> list[str]:
    """The late policy's part of a student's feedback.md header, one line per assignment."""
    lines = []
    for e in entries:
        when = f"submitted {_when(e.submitted)}, due {_when(e.due)}" if e.submitted else f"due {_when(e.due)}"
        lines.append(f"- {e.assignment}: {when}; {e.note}: **{points(e.penalised)} / {points(e.max_score)}** points "
                     f"after the late policy (raw score {points(e.score)})")
    return lines


def mark_feedback(path: Path, entries: list[Lateness]) -> None:
    """Put the late policy's lines under the title of a feedback.md just written from its report."""
    if path.is_file():
        path.write_text(with_late_section(path.read_text(encoding="utf-8"), entries), encoding="utf-8")


def with_late_section(text: str, entries: list[Lateness]) -> str:
    """A freshly rendered feedback.md's text with the late policy's lines under its title. Nothing is
    searched for in the text, which holds the student's messages: the section goes after the first line,
    the grader's own title, and a feedback is always rendered again from the gradebook before it is marked
    (autograder.cohort.publish), never marked twice."""
    return _with_section(text, (MARK_BEGIN, "Late policy:", MARK_END), feedback_lines(entries))


def _with_section(text: str, marks: tuple[str, str, str], lines: list[str]) -> str:
    """`text` with a section (its opening mark, its title, `lines`, its closing mark) after its first line."""
    title, _, body = text.partition("\n")
    block = "\n".join([marks[0], "", marks[1], "", *lines, "", marks[2]])
    return f"{title}\n\n{block}\n\n{body.lstrip(chr(10))}"


def adjusted_lines(adjusted: dict[str, tuple[float | None, float, float]]) -> list[str]:
    """The course file's overrides in a student's feedback, one line per assignment; `adjusted` is
    {assignment: (the score set, None where excused; the score after the late policy; the points graded
    here)}. The reason stays in the gradebook's audit, for the course staff."""
    return [f"- {name}: excused: it does not count towards your grade" if score is None else
            f"- {name}: **{points(score)} / {points(most)}** points, set by the course staff (the score graded, "
            f"after the late policy: {points(penalised)})" for name, (score, penalised, most) in adjusted.items()]


def mark_adjusted(folder: Path, adjusted: dict[str, tuple[float | None, float, float]],
                  excused_counts: bool = True) -> list[str]:
    """Put the course file's overrides (as adjusted_lines takes them) into a submission's freshly written
    feedback.md, under its title, and results.json: its score counts each score set in place of the one
    graded; an excused assignment's score is left out of it (a batch's files: the gradebook's final total), or,
    with `excused_counts` (Gradescope, where the assignment is the whole results.json), kept, the output saying
    that it does not count. Returns the lines, as the grader's log shows them."""
    from autograder.report.gradescope import with_adjustments

    if not adjusted:
        return []
    lines = adjusted_lines(adjusted)
    feedback = folder / "feedback.md"
    if feedback.is_file():
        text = _with_section(feedback.read_text(encoding="utf-8"), (ADJUSTED_BEGIN, "Set by the course staff:",
                                                                    ADJUSTED_END), lines)
        feedback.write_text(text, encoding="utf-8")
    plain = [line.removeprefix("- ").replace("**", "") for line in lines]
    results = folder / "results.json"
    added = sum(score - penalised for score, penalised, _ in adjusted.values() if score is not None) - (
        0.0 if excused_counts else sum(penalised for score, penalised, _ in adjusted.values() if score is None))
    results.write_text(json.dumps(with_adjustments(json.loads(results.read_text()), plain, added), indent=2) + "\n")
    return plain
