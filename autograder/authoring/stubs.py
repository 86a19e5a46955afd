"""Generate the student stubs (assignments/) from the reference solutions (solutions/).

    python -m autograder.authoring.stubs solutions assignments           # write
    python -m autograder.authoring.stubs solutions assignments --check   # exit 1 if out of sync

Python files: each solution region becomes `raise NotImplementedError("...")`, indented like its
marker, with a message naming the function, its file and the handout section given by the function's
docstring line `Handout: §N Title`. Markdown files (handouts): a solution region becomes "*Your answer
here.*", and a generated region (autograder.authoring.regions: the static checks' rules, written from their
definitions) is written again, in the students' copy and in the solution's handout itself. Hidden-test
regions are dropped everywhere. Every other file is copied byte for byte. A package
whose handout (README.md) has written questions also gets its students' answers file, answers.md
(autograder.written.answers's template: a section per question, a line per numeric part), and the solution's
answers.md, the same filled with the keys and model answers, is written beside the handout.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import sys
import tempfile
from pathlib import Path

from autograder.authoring import regions
from autograder.written import answers as wq
from autograder.model.markers import TEXT_STUB, MarkerError, Region, replace_regions

IGNORED = ("__pycache__", ".pytest_cache", ".ipynb_checkpoints")
HANDOUT_LINE = re.compile(r"^\s*Handout:\s*(§\S+.*?)\s*$", re.MULTILINE)


def stub_message(qualname: str, relpath: str, section: str) -> str:
    return f"{qualname} in {relpath} is not implemented yet: write it (handout {section})"


def _enclosing(tree: ast.Module, line: int) -> list[ast.AST]:
    """The chain of class and function definitions around a line, outermost first."""
    chain: list[ast.AST] = []
    nodes = list(tree.body)
    while nodes:
        node = next(
            (n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
             and n.lineno <= line <= n.end_lineno),
            None,
        )
        if node is None:
            break
        chain.append(node)
        nodes = list(node.body)
    return chain


def python_stub(text: str, relpath: str) -> str:
    """The stub of one solution .py file."""
    try:
        tree = ast.parse(text, filename=relpath)
    except SyntaxError as exc:
        raise MarkerError(relpath, exc.lineno or 0, f"the solution does not parse: {exc.msg}") from None

    def stub(region: Region) -> list[str]:
        chain = _enclosing(tree, region.begin)
        if not chain or isinstance(chain[-1], ast.ClassDef):
            raise MarkerError(relpath, region.begin, "a solution region must sit inside a function body")
        qualname = ".".join(node.name for node in chain)
        section = None
        for node in reversed(chain):
            match = HANDOUT_LINE.search(ast.get_docstring(node) or "")
            if match:
                section = match.group(1)
                break
        if section is None:
            raise MarkerError(relpath, region.begin,
                              f"{qualname} (or its class) needs a docstring line 'Handout: §N Title'")
        return [f"raise NotImplementedError({stub_message(qualname, relpath, section)!r})"]

    result = replace_regions(text, relpath, stub)
    try:
        ast.parse(result, filename=relpath)
    except SyntaxError as exc:
        raise MarkerError(relpath, exc.lineno or 0, f"the generated stub does not parse: {exc.msg}") from None
    return result


def generate(source: Path, target: Path) -> list[str]:
    """Replace `target` by the stub tree of `source`; returns the relative paths written.

    The tree is built beside `target` first, so a marker error leaves the old tree untouched.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        written = _write(source, Path(tmp) / "tree")
        if target.exists():
            shutil.rmtree(target)
        (Path(tmp) / "tree").rename(target)
    return written


def _write(source: Path, target: Path) -> list[str]:
    target.mkdir(parents=True)
    written = []
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if any(part in IGNORED for part in rel.parts) or path.suffix == ".pyc" or path.is_dir():
            continue
        if len(rel.parts) == 2 and rel.name == wq.ANSWERS:  # the model answers; students get the template
            continue
        out = target / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        relpath = rel.as_posix()
        if path.suffix == ".py":
            out.write_text(python_stub(path.read_text(encoding="utf-8"), relpath), encoding="utf-8")
        elif path.suffix == ".md":
            text = _filled(path.read_text(encoding="utf-8"), rel)
            out.write_text(text_stub(text, relpath), encoding="utf-8")
        else:
            shutil.copyfile(path, out)
        written.append(relpath)
    return written + _answers_files(source, target)


def text_stub(text: str, relpath: str) -> str:
    """A Markdown file as students get it: a written question's solution block becomes "*Your answer here.*"
    (the student answers it in answers.md), any other solution region (the worked answers of questions the
    tests grade through the code) goes without a trace, since there is nothing to write there."""
    try:
        answered = {q.solution_line for q in wq.parse_handout(text, relpath)} - {0}
    except wq.WrittenError:
        answered = None  # its questions cannot be read (said where they are read): every region a stub
    stubbed = replace_regions(text, relpath, lambda region: TEXT_STUB if answered is None or region.begin in answered
                              else [])
    return stubbed.replace("\n\n\n", "\n\n") if "\n\n\n" not in text else stubbed  # no gap where one went


def _filled(text: str, rel: Path) -> str:
    """A Markdown file with its generated regions written for the package that holds it."""
    return regions.fill(text, rel.parts[0], rel.as_posix()) if len(rel.parts) > 1 else text


def generated_handouts(source: Path) -> dict[Path, str]:
    """Each Markdown file of a package in `source`: path -> the text it must hold, generated regions written."""
    found = {}
    for path in sorted(source.glob("*/*.md")):
        if not any(part in IGNORED for part in path.relative_to(source).parts):
            found[path] = _filled(path.read_text(encoding="utf-8"), path.relative_to(source))
    return found


def _handout_questions(source: Path) -> dict[str, list]:
    """{package: its handout's written questions} for the packages that have some."""
    found = {}
    for handout in sorted(source.glob("*/README.md")):
        try:
            questions = wq.parse_handout(handout.read_text(encoding="utf-8"), f"{handout.parent.name}/README.md")
        except wq.WrittenError as exc:
            raise MarkerError(exc.path, exc.line, exc.problem) from None
        if questions:
            found[handout.parent.name] = questions
    return found


def _answers_files(source: Path, target: Path) -> list[str]:
    """<package>/answers.md, the students' template, for each package whose handout has written questions."""
    made = []
    for package, questions in _handout_questions(source).items():
        (target / package / wq.ANSWERS).write_text(wq.answers_template(package, questions), encoding="utf-8")
        made.append(f"{package}/{wq.ANSWERS}")
    return made


def model_answers(source: Path) -> dict[Path, str]:
    """The solution's answers.md of each package with written questions: path -> the text it must hold."""
    return {source / package / wq.ANSWERS: wq.model_answers(package, questions)
            for package, questions in _handout_questions(source).items()}


def _files(root: Path) -> dict[str, Path]:
    return {
        p.relative_to(root).as_posix(): p
        for p in root.rglob("*")
        if p.is_file() and p.suffix != ".pyc" and not any(part in IGNORED for part in p.relative_to(root).parts)
    }


def differences(expected: Path, actual: Path) -> list[str]:
    """Relative paths that differ between two trees: missing, extra, or with other bytes."""
    want, have = _files(expected), _files(actual)
    changed = {rel for rel in want.keys() & have.keys() if want[rel].read_bytes() != have[rel].read_bytes()}
    return sorted((want.keys() ^ have.keys()) | changed)


def check(source: Path, target: Path) -> list[str]:
    """What `generate` (and `write_model_answers`, `write_generated`) would change; empty when in sync."""
    stale = [str(path) for path, text in {**generated_handouts(source), **model_answers(source)}.items()
             if not path.is_file() or path.read_text(encoding="utf-8") != text]
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "stubs"
        _write(source, fresh)
        if not target.is_dir():
            return stale + ["(the whole tree is missing)"]
        return stale + differences(fresh, target)


def write_generated(source: Path) -> list[Path]:
    """Write the generated regions of the solution's handouts in `source`; returns the paths that changed."""
    changed = []
    for path, text in generated_handouts(source).items():
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def write_model_answers(source: Path) -> list[Path]:
    """Write each package's model answers.md in `source`; returns the paths."""
    answers = model_answers(source)
    for path, text in answers.items():
        path.write_text(text, encoding="utf-8")
    return list(answers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--check", action="store_true", help="exit 1 when target is out of sync")
    args = parser.parse_args(argv)
    try:
        if args.check:
            diffs = check(args.source, args.target)
            if diffs:
                print(f"{args.target}/ is out of sync with {args.source}/ (run `make assignments`):")
                print("\n".join(f"  {d}" for d in diffs))
                return 1
            print(f"{args.target}/ is in sync with {args.source}/")
            return 0
        write_generated(args.source)
        written = generate(args.source, args.target)
        write_model_answers(args.source)
    except MarkerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} files to {args.target}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
