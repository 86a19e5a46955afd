"""Written questions: read them from a handout, write the students' answers template, grade answers.md.

    questions = handout_questions("flash_attention")          # from solutions/<a>/README.md
    template = answers_template("flash_attention", questions)   # assignments/<a>/answers.md
    results = grade_answers("flash_attention", questions, read_answers(path))

A question in the handout (the format every handout follows; errors name the line and what to fix):

    **T2.** *(3 points)* The question's text.

    - **T2.a** *(1 point, ±1%)*: what the number is, with its unit.
    - **T2.b** *(1 point, exact)*: the first whole batch size that reaches the ridge.

    *Rubric (1 point):*
    - *(1)* the reasoning this point is earned by.

    ### BEGIN SOLUTION
    T2.a = 295.34
    T2.b = 319
    The model answer in prose ...
    ### END SOLUTION

A question ends at the next question header or the next `## ` heading. Numeric parts are graded here
with their tolerance (`exact`, `±x%` relative, `±x` absolute); the rubric is graded by hand (results
with status "manual" until an instructor's scores are imported, see autograder/written/manual.py).

A submission's answers.md is read as text, never run, before any of the submission's code runs:
sections by `## <ID>` headings; a numeric part is the first number after `<ID>.<letter> =` on its line
(thousands separators, e-notation, powers of ten and a trailing unit accepted). An empty `<ID>.<letter> =`
line (the template's) is no answer; a part answered on two lines scores 0. `read_part` is that reading, which
autograder.written.check shows a student before they submit (`make check-answers`), keys left out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from autograder.model.markers import TEXT_STUB, find_regions
from autograder.model.results import TestResult

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = "answers.md"
MAX_ANSWERS_BYTES = 256 * 1024
PREFIX = "written/"
MAX_NUMBER_LINE = 200  # characters of a numeric line read for its number
NBGRADER_STUB = "YOUR ANSWER HERE"  # what nbgrader's release puts in place of a markdown solution region

ID = r"[A-Z]+[0-9]+(?:\.[0-9]+)?"
NUMBER = r"[0-9]+(?:\.[0-9]+)?"
HEADER_START = re.compile(rf"^\*\*({ID})\.\*\*\s+\*\(")
HEADER = re.compile(rf"^\*\*(?P<id>{ID})\.\*\*\s+\*\((?P<points>{NUMBER}) points?\)\*\s*(?P<text>.*)$")
PART_START = re.compile(rf"^-\s+\*\*(?P<id>{ID})\.(?P<letter>[a-z])\*\*")
PART = re.compile(rf"^-\s+\*\*(?P<id>{ID})\.(?P<letter>[a-z])\*\*\s+\*\((?P<points>{NUMBER}) points?,\s*"
                  rf"(?P<tolerance>[^)]*)\)\*:?\s*(?P<text>.*)$")
RUBRIC_START = re.compile(r"^\*Rubric\b")
RUBRIC = re.compile(rf"^\*Rubric \((?P<points>{NUMBER}) points?\):\*\s*$")
CRITERION = re.compile(rf"^-\s+\*\((?P<points>{NUMBER})\)\*\s+(?P<text>\S.*)$")
KEY = re.compile(rf"^(?P<id>{ID})\.(?P<letter>[a-z])\s*=\s*(?P<value>.*)$")
TOLERANCE = re.compile(rf"^(?:exact|±\s*(?P<value>{NUMBER}(?:[eE][-+]?[0-9]+)?)\s*(?P<percent>%?))$")
SOLUTION_BEGIN = re.compile(r"###\s*BEGIN SOLUTION\b")

# A number as people write it: 8,589,934,592 or 8_589_934_592 or 8 589 934 592 (a comma or a space before a
# group of three digits: `1,5` is 1 and 5, `2944 3072` two numbers), 8.59e9, 8.59E+09, 8.59 x 10^9, 8.59 * 10**9, 8.59·10⁹, and a power: 2^33, 2**33, 2³³; the
# first one on the line counts, what follows it (a unit, a word, a percent sign) is ignored: 85.9% reads 85.9.
# What the student may have meant otherwise is said by `doubts` (make check-answers marks it).
ANSWER_NUMBER = re.compile(r"(?<![\w.])(?P<sign>[-+−]?)\s*(?P<int>[0-9](?:[0-9]|_(?=[0-9])|[, ](?=[0-9]{3}(?![0-9])))*)?"
                           r"(?P<frac>\.[0-9]+)?(?:[eE](?P<exp>[-+]?[0-9]+)"
                           r"|\s*[x×*·]\s*10\s*(?:\^|\*\*)\s*(?P<pow>[-+−]?[0-9]+)"
                           r"|\s*[x×*·]\s*10(?P<sup>[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)"
                           r"|\s*(?:\^|\*\*)\s*(?P<power>[-+−]?[0-9]+)|(?P<superscript>[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+))?")
EXPONENT_SIGNS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺−", "0123456789-+-")  # superscripts and U+2212 as ASCII


class WrittenError(ValueError):
    """A handout breaks the written-questions format: `path:line: what is wrong and what to do`."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.path, self.line, self.problem = path, line, problem


@dataclass(frozen=True)
class Tolerance:
    kind: str  # "exact", "relative" or "absolute"
    value: float = 0.0

    def __str__(self) -> str:
        return {"exact": "exactly", "relative": f"within ±{self.value:g}%",
                "absolute": f"within ±{self.value:g}"}[self.kind]

    def accepts(self, answer: float, key: float) -> bool:
        if self.kind == "exact":
            return answer == key
        allowed = abs(key) * self.value / 100 if self.kind == "relative" else self.value
        return abs(answer - key) <= allowed * (1 + 1e-12)


@dataclass
class Part:
    id: str  # "W2.a"
    points: float
    tolerance: Tolerance
    text: str
    line: int
    key: float | None = None


@dataclass
class Criterion:
    points: float
    text: str


@dataclass
class Question:
    id: str
    points: float
    text: str
    line: int
    parts: list[Part] = field(default_factory=list)
    rubric_points: float = 0.0
    criteria: list[Criterion] = field(default_factory=list)
    model_answer: str = ""
    solution_line: int = 0  # the line of its solution block's BEGIN marker (0: none)


# ---- numbers ------------------------------------------------------------------------------------

def first_number(text: str) -> float | None:
    """The first number written in `text` (see ANSWER_NUMBER), or None."""
    for match in ANSWER_NUMBER.finditer(text):
        if match.group("int") is None and match.group("frac") is None:
            continue
        digits = re.sub(r"[,_ ]", "", match.group("int") or "0") + (match.group("frac") or "")
        exponent = (match.group("exp") or match.group("pow") or match.group("sup") or "0").translate(EXPONENT_SIGNS)
        power = (match.group("power") or match.group("superscript") or "").translate(EXPONENT_SIGNS)
        try:
            value = float(f"{digits}e{exponent}")
            if power:
                value = value ** int(power)
        except (ValueError, OverflowError, ZeroDivisionError):
            return None
        value = -value if match.group("sign") in ("-", "−") else value
        return value if math.isfinite(value) else None
    return None


def _numbers(text: str) -> list[re.Match]:
    """Every number written in `text`, as ANSWER_NUMBER finds them."""
    return [m for m in ANSWER_NUMBER.finditer(text) if m.group("int") is not None or m.group("frac") is not None]


# An operator between two numbers, read on the line with each number (its own notation included: 8.59 x 10^9,
# 2^33) written as N; "FLOP/byte" or "B/s" is a unit, not an operator.
OPERATOR = re.compile(r"N\s*[-−/+*×x÷^=]\s*[N(]|N\s*\)?\s*[-−/+*×÷^=]\s*N")
FRACTION = re.compile(r"\bfraction\b", re.IGNORECASE)


def number_text(value: float) -> str:
    """The number in full: a whole one as its digits (8589934592), another as Python's shortest repr."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e18 else repr(value)


def doubts(text: str, part_text: str = "") -> str:
    """Why the number the grader reads from `text` (the first) may not be the one the student meant, for the
    line of a part whose handout text is `part_text`: an expression (the grader computes nothing), "or", more
    than one number, a percent sign where the part asks for a fraction; "" when nothing is in doubt."""
    numbers = _numbers(text)
    value = first_number(text)
    if not numbers or value is None:
        return ""
    first = number_text(value)
    pieces, last = [], 0
    for match in numbers:
        pieces += [text[last:match.start()], "N"]
        last = match.end()
    skeleton = "".join(pieces) + text[last:]
    found = []
    if FRACTION.search(part_text) and "%" in text[numbers[0].end():]:
        found.append(f"a percent sign where the part asks for a fraction: {first}% is read as {first}, not "
                     f"{number_text(value / 100)}; write the fraction")
    if OPERATOR.search(skeleton):
        found.append(f"an expression: the grader does not compute it, it reads {first}; write its value")
    elif re.search(r"\bor\b", text, re.IGNORECASE):
        found.append(f"'or': two answers? The grader reads the first, {first}; write one")
    elif len(numbers) > 1:
        found.append(f"{len(numbers)} numbers: the grader reads only the first, {first}; write the one you mean")
    return "; ".join(found)


def key_number(text: str) -> float | None:
    """A key as the handout writes it: one number (`_` or `,` separators, e-notation), nothing else."""
    text = text.strip()
    if not re.fullmatch(r"[-+]?[0-9][0-9_,]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?", text):
        return None
    return first_number(text.replace("_", ","))


def _fraction(text: str) -> Fraction:
    return Fraction(text)


def _points(value: Fraction) -> str:
    return str(int(value)) if value.denominator == 1 else f"{float(value):g}"


# ---- the handout --------------------------------------------------------------------------------

def handout_path(assignment: str, root: Path = ROOT / "solutions") -> Path:
    return Path(root) / assignment / "README.md"


def handout_questions(assignment: str, root: Path = ROOT / "solutions", released: bool = False) -> list[Question]:
    """The written questions of solutions/<assignment>/README.md ([] when it has none); `released`: of the
    students' copy of the handout (root assignments/), whose solution blocks hold only the stub's placeholder,
    so its parts have no keys."""
    path = handout_path(assignment, root)
    if not path.is_file():
        return []
    return parse_handout(path.read_text(encoding="utf-8"), f"{assignment}/README.md", released)


def parse_handout(text: str, path: str = "README.md", released: bool = False) -> list[Question]:
    """Every question of a handout, validated; WrittenError names the first line that breaks a rule. A
    `released` handout (the students' copy) has the stub's placeholder where each solution block was, and no
    keys."""
    lines = text.splitlines()
    solutions = {r.begin: r.end for r in find_regions(text, path) if r.kind == "solution"}
    blocks: list[tuple[int, int]] = []  # (header index, end index) of each question
    fenced, start = False, None
    for index, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        if HEADER_START.match(line) or line.startswith("## "):
            if start is not None:
                blocks.append((start, index))
                start = None
            if HEADER_START.match(line):
                start = index
    if start is not None:
        blocks.append((start, len(lines)))
    questions: list[Question] = []
    seen: dict[str, int] = {}
    for begin, end in blocks:
        question = _question(lines, begin, end, solutions, path, released)
        if question.id in seen:
            raise WrittenError(path, begin + 1, f"question {question.id} is already defined at line "
                                                f"{seen[question.id]}: give each question its own id")
        seen[question.id] = begin + 1
        questions.append(question)
    return questions


def _question(lines: list[str], begin: int, end: int, solutions: dict[int, int], path: str,
              released: bool = False) -> Question:
    header = HEADER.match(lines[begin])
    if header is None:
        raise WrittenError(path, begin + 1, "a question header must read `**<ID>.** *(<P> points)* <text>` "
                                            "(ID like W1, Q6.1 or T2; P a number, `point` when it is 1)")
    question = Question(header["id"], float(header["points"]), header["text"].strip(), begin + 1)
    text, rubric_total, solution = [question.text], None, None
    index = begin + 1
    while index < end:
        line, number = lines[index], index + 1
        if number in solutions:
            if solution is not None:
                raise WrittenError(path, number, f"{question.id} has a second solution block: keep its keys and "
                                                 "model answer in one")
            solution = (index, solutions[number] - 1)
            question.solution_line = number
            index = solutions[number]
            continue
        if PART_START.match(line):
            question.parts.append(_part(line, number, question, path))
        elif RUBRIC_START.match(line):
            if rubric_total is not None:
                raise WrittenError(path, number, f"{question.id} has a second rubric: keep one `*Rubric (r points):*`")
            match = RUBRIC.match(line)
            if match is None:
                raise WrittenError(path, number, "a rubric line must read `*Rubric (<r> points):*` alone on its "
                                                 "line, its criteria as bullets `- *(<p>)* <criterion>` below it")
            rubric_total = _fraction(match["points"])
            index = _criteria(lines, index + 1, end, question, path)
            continue
        elif not question.parts and rubric_total is None:
            text.append(line)
        elif released and line.strip() in TEXT_STUB:
            pass  # where the solution block was
        elif line.strip() and solution is None:
            raise WrittenError(path, number, f"{question.id}: text between its parts or rubric and its solution "
                                             "block; put the question's text before the parts")
        index += 1
    question.text = "\n".join(text).strip()
    _check_points(question, rubric_total, path)
    if solution is not None:
        _keys(lines, solution, question, path)
    missing = [p.id for p in question.parts if p.key is None]
    if missing and not released:
        raise WrittenError(path, question.line, f"{question.id}: no key for {', '.join(missing)}: write "
                                                f"`{missing[0]} = <number>` in the question's solution block")
    return question


def _part(line: str, number: int, question: Question, path: str) -> Part:
    match = PART.match(line)
    if match is None:
        raise WrittenError(path, number, "a numeric part must read `- **<ID>.<letter>** *(<p> points, "
                                         "<tolerance>)*: <text>` with tolerance `exact`, `±<x>%` or `±<x>`")
    if match["id"] != question.id:
        raise WrittenError(path, number, f"part {match['id']}.{match['letter']} sits under question {question.id}: "
                                         f"name it {question.id}.{match['letter']}")
    part_id = f"{question.id}.{match['letter']}"
    if any(p.id == part_id for p in question.parts):
        raise WrittenError(path, number, f"{part_id} is defined twice: give each part its own letter")
    tolerance = TOLERANCE.match(match["tolerance"].strip())
    if tolerance is None:
        raise WrittenError(path, number, f"{part_id}: tolerance {match['tolerance']!r} is not `exact`, "
                                         "`±<x>%` or `±<x>`")
    if tolerance["value"] is None:
        kind = Tolerance("exact")
    else:
        value = float(tolerance["value"])
        if value <= 0:
            raise WrittenError(path, number, f"{part_id}: a tolerance of ±0 is `exact`; write that, or a "
                                             "positive tolerance")
        kind = Tolerance("relative" if tolerance["percent"] else "absolute", value)
    return Part(part_id, float(match["points"]), kind, match["text"].strip(), number)


def _criteria(lines: list[str], index: int, end: int, question: Question, path: str) -> int:
    """Read the rubric's bullets (a criterion may wrap onto indented lines); return the next index."""
    while index < end:
        line = lines[index]
        if line.startswith("- "):
            match = CRITERION.match(line)
            if match is None:
                raise WrittenError(path, index + 1, "a rubric criterion must read `- *(<p>)* <criterion>`")
            question.criteria.append(Criterion(float(match["points"]), match["text"].strip()))
        elif line.startswith((" ", "\t")) and line.strip() and question.criteria:
            last = question.criteria[-1]
            last.text = f"{last.text} {line.strip()}"
        elif line.strip() or question.criteria:  # blank lines may only come before the first criterion
            break
        index += 1
    if not question.criteria:
        raise WrittenError(path, index, f"{question.id}: its rubric has no criteria: list them as bullets "
                                        "`- *(<p>)* <criterion>` under the rubric line")
    return index


def _check_points(question: Question, rubric_total: Fraction | None, path: str) -> None:
    total = _fraction(str(question.points))
    parts = sum((_fraction(str(p.points)) for p in question.parts), Fraction(0))
    if rubric_total is None:
        if not question.parts:
            raise WrittenError(path, question.line, f"{question.id} has neither numeric parts nor a rubric: add "
                                                    "`*Rubric (<r> points):*` with its criteria")
        if parts != total:
            raise WrittenError(path, question.line, f"{question.id} is worth {_points(total)} points but its parts "
                                                    f"add up to {_points(parts)} and it has no rubric: add a rubric "
                                                    "for the rest or fix the points")
        return
    criteria = sum((_fraction(str(c.points)) for c in question.criteria), Fraction(0))
    if criteria != rubric_total:
        raise WrittenError(path, question.line, f"{question.id}: the rubric's criteria add up to "
                                                f"{_points(criteria)}, not the {_points(rubric_total)} its rubric "
                                                "line says")
    if parts + rubric_total != total:
        raise WrittenError(path, question.line, f"{question.id} is worth {_points(total)} points but its parts "
                                                f"({_points(parts)}) and rubric ({_points(rubric_total)}) add up to "
                                                f"{_points(parts + rubric_total)}")
    question.rubric_points = float(rubric_total)


def _keys(lines: list[str], solution: tuple[int, int], question: Question, path: str) -> None:
    """The `<ID>.<letter> = <number>` lines at the top of the solution block, then the model answer."""
    parts = {p.id: p for p in question.parts}
    prose: list[str] = []
    for index in range(solution[0] + 1, solution[1]):
        line, number = lines[index], index + 1
        match = KEY.match(line.strip())
        if match is None:
            if line.strip() or prose:
                prose.append(line)
            continue
        part_id = f"{match['id']}.{match['letter']}"
        if prose:
            raise WrittenError(path, number, f"the key of {part_id} comes after the model answer's prose: put "
                                             "the key lines first in the solution block")
        if part_id not in parts:
            raise WrittenError(path, number, f"a key for {part_id}, which is not a part of {question.id}: add the "
                                             "part's bullet or remove the key")
        part = parts[part_id]
        if part.key is not None:
            raise WrittenError(path, number, f"{part_id} has two keys: keep one")
        value = key_number(match["value"])
        if value is None:
            raise WrittenError(path, number, f"the key of {part_id} is {match['value'].strip()!r}, not a number "
                                             "(write e.g. 8_589_934_592, 8,589,934,592 or 8.59e9)")
        if part.tolerance.kind == "exact" and not float(value).is_integer():
            raise WrittenError(path, number, f"{part_id} is graded exactly, so its key must be a whole number, "
                                             f"not {match['value'].strip()}: give it a tolerance instead")
        part.key = value
    question.model_answer = "\n".join(prose).strip()


# ---- the students' answers file -------------------------------------------------------------------

def answers_template(assignment: str, questions: list[Question]) -> str:
    """assignments/<assignment>/answers.md: a section per question, a line per numeric part."""
    lines = [f"# Written answers: {assignment}", "",
             "How to answer: write each number after the `=` of its line (one number, its unit after it if you",
             "like: `8,589,934,592 bytes`, `8.59e9`); write the reasoning below the line `Answer:` of the",
             "question. Keep the `## ` headings and the numeric lines' names as they are: answers are found",
             "by them. The numbers are graded automatically with the tolerance the handout states; the",
             "reasoning is graded by hand with the handout's rubric. This file is read as text only.", ""]
    for question in questions:
        lines += [f"## {question.id}", ""]
        if question.parts:
            lines += [f"{part.id} =" for part in question.parts] + [""]
        if question.criteria:
            lines += ["Answer:", ""]
    return "\n".join(lines)


def cell_id(question_id: str) -> str:
    """The notebook answer cell's id, `answer-Q6_1` for Q6.1 (a cell id may not hold a dot)."""
    return "answer-" + question_id.replace(".", "_")


def question_of_cell(cell_id_: str) -> str | None:
    """The question id an answer cell's id names (`answer-Q6_1` -> Q6.1), or None."""
    match = re.fullmatch(r"answer-([A-Z]+[0-9]+)(?:_([0-9]+))?", cell_id_)
    if match is None:
        return None
    return match.group(1) + (f".{match.group(2)}" if match.group(2) else "")


def cell_template(question: Question) -> str:
    """What an answer cell offers the student: the question's section of answers.md, without heading."""
    lines = [f"{part.id} =" for part in question.parts]
    if question.criteria:
        lines += [""] * bool(lines) + ["Answer:"]
    return "\n".join(lines)


def answers_from_cells(assignment: str, cells: list[tuple[str, str]]) -> str:
    """answers.md from a notebook's answer cells [(question id, cell text)], in the notebook's order;
    nbgrader's "YOUR ANSWER HERE" placeholder lines are left out."""
    lines = answers_template(assignment, []).splitlines()
    for question_id, text in cells:
        kept = [line for line in text.splitlines() if line.strip() != NBGRADER_STUB]
        lines += [f"## {question_id}", "", *kept, ""]
    return "\n".join(lines)


def model_answers(assignment: str, questions: list[Question]) -> str:
    """solutions/<assignment>/answers.md: the template filled with the keys and the model answers, so
    the reference solution is a complete submission (its numeric parts score; its prose awaits a grader)."""
    lines = answers_template(assignment, questions).splitlines()
    filled: list[str] = []
    by_id = {q.id: q for q in questions}
    current = None
    for line in lines:
        if line.startswith("## "):
            current = by_id[line[3:]]
        part = next((p for p in current.parts if line == f"{p.id} ="), None) if current else None
        if part is not None:
            line = f"{part.id} = {int(part.key) if float(part.key).is_integer() else repr(part.key)}"
        filled.append(line)
        if line == "Answer:" and current is not None:
            filled += ["", current.model_answer]
    return "\n".join(filled) + "\n"


@dataclass
class Answers:
    """A submission's answers.md, read; `problem` says why it could not be (then nothing is answered)."""

    sections: dict[str, list[str]] = field(default_factory=dict)
    repeated: set[str] = field(default_factory=set)
    problem: str = ""


def read_answers(path: Path, limit: int = MAX_ANSWERS_BYTES) -> Answers:
    """The answers file at `path`, as text: never a symlink, at most `limit` bytes, UTF-8 text."""
    path = Path(path)
    where = f"{path.parent.name}/{path.name}"
    if path.is_symlink():
        return Answers(problem=f"{where} is a symlink: not read; submit the file itself")
    if not path.exists():
        return Answers(problem=f"no {where} in the submission: copy the {ANSWERS} of the assignment's package, "
                               "fill it in and submit it inside the package folder")
    if not path.is_file():
        return Answers(problem=f"{where} is not a regular file: not read")
    if path.stat().st_size > limit:
        return Answers(problem=f"{where} is larger than {limit >> 10} KiB: not read; write the answers only")
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        return Answers(problem=f"{where} cannot be read ({exc.strerror}): not read")
    return parse_answers(data, where, limit)


def parse_answers(data: bytes, where: str = ANSWERS, limit: int = MAX_ANSWERS_BYTES) -> Answers:
    if len(data) > limit:
        return Answers(problem=f"{where} is larger than {limit >> 10} KiB: not read; write the answers only")
    if b"\x00" in data:
        return Answers(problem=f"{where} is not text (it holds NUL bytes): not read; save it as plain UTF-8 text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return Answers(problem=f"{where} line {line} is not UTF-8 text: not read; save it as UTF-8")
    answers = Answers()
    current: list[str] | None = None
    for line in text.splitlines():
        heading = re.match(rf"^##\s+({ID})\s*$", line.strip())
        if heading:
            name = heading.group(1)
            if name in answers.sections:
                answers.repeated.add(name)
            current = answers.sections.setdefault(name, [])
        elif re.match(r"#{1,2}\s", line):  # another heading ends the section
            current = None
        elif current is not None:
            current.append(line)
    return answers


def _part_line(part_id: str) -> re.Pattern:
    return re.compile(rf"^\s*(?:[-*]\s+)?\**{re.escape(part_id)}\**\s*[=:](?P<rest>.*)$")


def prose_of(question: Question, answers: Answers) -> str:
    """The question's section without its numeric lines and the template's `Answer:` line."""
    patterns = [_part_line(p.id) for p in question.parts]
    kept = [line for line in answers.sections.get(question.id, [])
            if not any(p.match(line) for p in patterns) and line.strip() != "Answer:"]
    return "\n".join(kept).strip()


def grade_answers(assignment: str, questions: list[Question], answers: Answers) -> list[TestResult]:
    """One result per numeric part (graded here) and one per rubric (status "manual": graded by hand)."""
    results = []
    for question in questions:
        section = answers.sections.get(question.id)
        repeated = question.id in answers.repeated
        for part in question.parts:
            results.append(_grade_part(assignment, part, section, repeated, answers.problem))
        if question.rubric_points:
            results.append(_prose_result(assignment, question, answers))
    return results


@dataclass(frozen=True)
class Reading:
    """What the grader reads for one numeric part of answers.md: its number, or (value None) why there is
    none, with the status that result gets; `shown` is the answer's text as written."""

    value: float | None
    status: str = ""
    message: str = ""
    shown: str = ""
    doubt: str = ""  # why the number read may not be the one meant (autograder.written.answers.doubts)


def read_part(part: Part, section: list[str] | None, repeated: bool, problem: str) -> Reading:
    """The number written for `part` in its question's section (None where the section is missing), read as
    the grader reads it; `repeated`: the section's heading appears more than once; `problem`: why the whole
    file was not read. The same reading serves the grading and `make check-answers`, which shows it."""
    question = part.id.rsplit(".", 1)[0]
    if problem:
        return Reading(None, "not_implemented" if problem.startswith("no ") else "failed",
                       f"{part.id}: not graded, {problem}")
    if section is None:
        return Reading(None, "failed", f"{part.id}: no section `## {question}` in answers.md: keep the template's "
                                       "headings")
    pattern = _part_line(part.id)
    found = [match["rest"] for match in map(pattern.match, section) if match]
    if not found:
        return Reading(None, "failed", f"{part.id}: no line `{part.id} =` under `## {question}`: keep the "
                                       "template's numeric lines and write the number after the `=`")
    answered = [rest for rest in found if rest.strip()]  # the template's empty line is no answer
    if len(answered) > 1:
        where = " (the heading appears more than once)" if repeated else ""
        return Reading(None, "failed", f"{part.id}: answered on {len(answered)} lines{where}: only one answer "
                                       "counts, so none is graded; keep one line per part")
    if not answered:
        elsewhere = _number_elsewhere(section, question)
        return Reading(None, "not_implemented", f"{part.id}: not answered yet: "
                       + (f"a number appears {elsewhere}; write it after `{part.id} =`" if elsewhere else
                          f"expected a number after `{part.id} =`; found 'nothing'"))
    shown = answered[0].strip()[:80]
    answer = first_number(answered[0][:MAX_NUMBER_LINE])
    if answer is None:
        return Reading(None, "failed", f"{part.id}: expected a number after `{part.id} =`; found {shown!r}", shown)
    return Reading(answer, shown=shown, doubt=doubts(answered[0][:MAX_NUMBER_LINE], part.text))


def _grade_part(assignment: str, part: Part, section: list[str] | None, repeated: bool,
                problem: str) -> TestResult:
    def result(status: str, message: str) -> TestResult:
        return TestResult(name=f"{PREFIX}{part.id}", assignment=assignment, max_points=part.points,
                          status=status, message=message, task="written", checks=part.text)

    reading = read_part(part, section, repeated, problem)
    answer, shown = reading.value, reading.shown
    if answer is None:
        return result(reading.status, reading.message)
    if part.tolerance.kind == "exact" and not answer.is_integer():
        return result("failed", f"{part.id}: expected a whole number (graded exactly); got {shown}")
    if part.tolerance.accepts(answer, part.key):
        return result("passed", f"{part.id}: {answer:g} is {part.tolerance} of the key")
    read = f" (read from {shown!r}: {reading.doubt})" if reading.doubt else ""
    return result("failed", f"{part.id}: expected {part.tolerance} of the key; got {answer:g}{read}")


def _number_elsewhere(section: list[str], question: str) -> str:
    """Where the first number of the section outside its numeric lines is (below `Answer:` or in the section,
    with the line), for the feedback of a part left empty; "" when there is none."""
    numeric = re.compile(rf"^\s*(?:[-*]\s+)?\**{ID}\.[a-z]\**\s*[=:]")
    below = False
    for line in section:
        below = below or line.strip() == "Answer:"
        if not numeric.match(line) and first_number(line[:MAX_NUMBER_LINE]) is not None:
            place = "below `Answer:`" if below else f"under `## {question}`"
            return f"{place} ({line.strip()[:80]!r})"
    return ""


def _prose_result(assignment: str, question: Question, answers: Answers) -> TestResult:
    rubric = "; ".join(f"({c.points:g}) {c.text}" for c in question.criteria)
    prose = "" if answers.problem else prose_of(question, answers)
    base = dict(name=f"{PREFIX}{question.id}", assignment=assignment, max_points=question.rubric_points,
                task="written", checks=rubric[:480], answer=prose)
    if answers.problem:
        return TestResult(status="not_implemented" if answers.problem.startswith("no ") else "failed",
                          message=f"{question.id}: not graded, {answers.problem}", **base)
    if not prose:
        return TestResult(status="not_implemented", message=f"{question.id}: not answered yet: no answer written "
                                                            f"under `## {question.id}`", **base)
    note = " (its heading appears more than once: every section of it is read)" if question.id in answers.repeated else ""
    return TestResult(status="manual", message=f"{question.id}: to be graded by hand ({len(prose)} characters){note}",
                      **base)


def written_results(assignment: str, package: Path, root: Path = ROOT / "solutions") -> list[TestResult]:
    """The written results of one assignment from the package folder of a submission (the copy the
    grader made before any student code ran); [] when the handout has no questions."""
    questions = handout_questions(assignment, root)
    if not questions:
        return []
    return grade_answers(assignment, questions, read_answers(Path(package) / ANSWERS))
