"""The README and the manual in docs/ name only what exists.

For each page, in its code (fenced blocks and inline code spans): every `make TARGET` is a target with a
rule in the Makefile the page is for (docs/students.md is the student release's README, so the release's
Makefile, autograder/package/templates/student.mk; every other page this repository's Makefile), read
from make's own database (`make -pRrq`, nothing run); every `python -m autograder VERB` or `autograder
VERB` answers `VERB --help` with status 0; every `python -m autograder.MODULE` or `kernels.MODULE` is a
module that `-m` can run; every path under autograder/, kernels/, scripts/, solutions/ or tests/ exists.
In its prose: every relative link points to a file that exists, and a link with #anchor to a heading of
that file. The same checker reads the built release's README in tests/autograder/package/test_release.py.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
STUDENT_PAGE = ROOT / "docs" / "students.md"
STUDENT_MAKEFILE = ROOT / "autograder" / "package" / "templates" / "student.mk"

FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", re.M | re.S)
SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)
VERB = re.compile(r"(?<![\w./-])autograder((?: [a-z][a-z-]*(?=\s|$)){1,2})")
MODULE = re.compile(r"\bpython3? -m ((?:autograder|kernels)(?:\.\w+)+)")
CODE_PATH = re.compile(r"(?<![\w./-])((?:autograder|kernels|scripts|solutions|tests)/[\w./-]*)")
MAKE_OPTIONS_WITH_VALUE = {"-C", "-f", "-j", "-l", "-o", "-W", "-I"}
COMMAND_ENDS = ("&&", "||", ";", "|", "(", ")")
# A calling make's flags (under `make test`, -n or -q would reach our make) and a path that would import the
# repository's autograder where the page is for another tree.
POINTS_ELSEWHERE = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "PYTHONPATH")


def code(text: str) -> list[str]:
    """The code of a Markdown page: each line of its fenced blocks, and each inline code span of the rest
    (a span that runs over a line break read as one line)."""
    lines = [line for block in FENCE.findall(text) for line in block.splitlines()]
    return lines + [" ".join(span.split()) for span in SPAN.findall(FENCE.sub("", text))]


def prose(text: str) -> str:
    """The page without its code: where links and headings are."""
    return SPAN.sub("", FENCE.sub("", text))


def make_targets(text: str) -> set[str]:
    """The targets of every make command in the page's code: `make test A=gpu_kernels` names test (a
    variable is no target), `srun ... make test` too; a command ends at &&, ;, |, a parenthesis or a comment."""
    targets = set()
    for line in code(text):
        words = re.split(r"(?:^|\s)#", line)[0].split()
        for start in (i for i, word in enumerate(words) if word == "make"):
            skip_value = False
            for word in words[start + 1:]:
                if word.startswith(COMMAND_ENDS):
                    break
                if skip_value or word.startswith("-") or "=" in word:
                    skip_value = word in MAKE_OPTIONS_WITH_VALUE
                    continue
                targets.add(word)
    return targets


def verbs(text: str) -> set[str]:
    """The verbs of every `python -m autograder VERB` or `autograder VERB` in the page's code, with a
    sub-verb where one follows (`manual export`); arguments in capitals or with a / or . are not verbs."""
    return {found.strip() for line in code(text) for found in VERB.findall(line)}


def modules(text: str) -> set[str]:
    return {name for line in code(text) for name in MODULE.findall(line)}


def code_paths(text: str) -> set[str]:
    """Paths of the repository's own folders named in the code, less placeholders (<assignment>, *, ...)."""
    return {path.rstrip(".,:;") for line in code(text) for path in CODE_PATH.findall(line)
            if not re.search(r"[<>*{}]|\.\.\.", path)}


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(heading) for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8")))}


def clean_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in POINTS_ELSEWHERE}


@functools.lru_cache(maxsize=None)
def makefile_targets(makefile: Path) -> frozenset[str]:
    """The targets with a rule in a Makefile, as make reads it: its database (`-p`), with nothing built (`-q`)
    and no built-in rules (`-R -r`); files make only knows of ("Not a target") and special targets left out."""
    done = subprocess.run(["make", "-pRrq", "-f", str(makefile)], cwd=makefile.parent, env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    database = done.stdout.split("\n# Files\n", 1)
    assert len(database) == 2, f"make printed no database for {makefile}: {done.stderr[-500:]}"
    targets, previous = set(), ""
    for line in database[1].splitlines():
        rule = re.match(r"([A-Za-z0-9][\w./-]*):(?!=)", line)
        if rule and previous != "# Not a target:" and "%" not in rule.group(1):
            targets.add(rule.group(1))
        previous = line
    return frozenset(targets)


@functools.lru_cache(maxsize=None)
def help_fails(verb: str, root: Path) -> str | None:
    """None when `python -m autograder VERB --help` exits 0 in root; else why it did not."""
    done = subprocess.run([sys.executable, "-m", "autograder", *verb.split(), "--help"], cwd=root, env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    return None if done.returncode == 0 else f"exit {done.returncode}: {done.stderr.strip()[-300:]}"


def link_problem(page: Path, target: str) -> str | None:
    """Why a relative link of the page leads nowhere, or None."""
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
        return f"links to {target}, and {path} does not exist (links are relative to the page's folder)"
    if anchor and file.suffix == ".md" and anchor not in anchors(file):
        return f"links to {target}, and {file.name} has no heading whose anchor is #{anchor}"
    return None


def problems(page: Path, makefile: Path, root: Path) -> list[str]:
    """Everything the page names that does not exist: `make` targets that are not targets of makefile,
    verbs whose --help fails and modules or paths missing in root (the tree the page is for), broken links."""
    text, name = page.read_text(encoding="utf-8"), page.name
    found = [f"{name} names `make {target}`, which is no target of {makefile.name}; its targets: "
             f"{', '.join(sorted(makefile_targets(makefile)))}"
             for target in sorted(make_targets(text) - makefile_targets(makefile))]
    found += [f"{name} names `python -m autograder {verb}`, whose --help fails ({why})"
              for verb in sorted(verbs(text)) if (why := help_fails(verb, root))]
    found += [f"{name} names `python -m {module}`, and {root.name}/ has no such module"
              for module in sorted(modules(text)) if not runnable(root, module)]
    found += [f"{name} names {path}, which {root.name}/ does not hold" for path in sorted(code_paths(text))
              if not (root / path).exists()]
    links = [target for target in LINK.findall(prose(text)) if not re.match(r"[a-z]+:", target)]
    found += [f"{name} {why}" for target in links if (why := link_problem(page, target))]
    return found


def runnable(root: Path, module: str) -> bool:
    """Whether `python -m module` finds it in root: a module file, or a package with a __main__."""
    path = root.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def makefile_of(page: Path) -> Path:
    return STUDENT_MAKEFILE if page == STUDENT_PAGE else ROOT / "Makefile"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_each_page_names_only_targets_verbs_modules_paths_and_links_that_exist(page):
    assert problems(page, makefile_of(page), ROOT) == []


def test_the_pages_name_the_commands_the_checks_are_about():
    """The collectors find what the pages are known to name: a collector that finds nothing checks nothing."""
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    assert {"test", "grade", "release", "gpu-compile", "gpu-validate", "check-answers"} <= make_targets(text)
    assert {"grade", "batch", "manual export", "manual import", "report", "export"} <= verbs(text)
    assert {"autograder.bench", "kernels.crosscompile"} <= modules(text)
    assert {"autograder/cohort/sample.py", "scripts/gpu_validate.py"} <= code_paths(text)
    assert len(LINK.findall(prose(text))) > 20


def test_make_targets_skips_variables_options_and_what_follows_the_command():
    text = ("`make test A=gpu_kernels T=flops.FlopCounter`, `srun --gres=gpu:1 make test-public`,\n"
            "```bash\nmake -C somewhere -n grade SUBMISSION=x && make lock # then make nothing\n```\n"
            "`make` alone, and `cmake build`")
    assert make_targets(text) == {"test", "test-public", "grade", "lock"}


def test_the_checker_reports_a_missing_target_verb_module_path_link_and_anchor(tmp_path):
    """A planted page that names one of each thing that does not exist: each is reported, by name."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A heading\n")
    page = tmp_path / "planted.md"
    page.write_text(
        "# Planted\n\n"
        "Run `make test`, then `make no-such-target A=x`.\n\n"
        "```bash\n.venv/bin/python -m autograder grade sub/ --out out/\npython -m autograder nonesuch OUT\n```\n\n"
        "`python -m autograder.no_such_module` reads `autograder/no_such_file.py`; `autograder/cli.py` is real.\n"
        "See [the other page](other.md#a-heading), [no page](missing.md), [no heading](other.md#nowhere) "
        "and [this page](#planted), [nor here](#elsewhere), [the web](https://example.org/x).\n")
    found = problems(page, ROOT / "Makefile", ROOT)
    expected = ["`make no-such-target`", "`python -m autograder nonesuch`", "`python -m autograder.no_such_module`",
                "autograder/no_such_file.py", "missing.md", "other.md#nowhere", "#elsewhere"]
    assert len(found) == len(expected), "\n".join(found)
    for what, problem in zip(expected, found):
        assert what in problem, f"expected a problem naming {what}, got: {problem}"
    assert "its targets: " in found[0] and "gpu-validate" in found[0]
    assert "invalid choice: 'nonesuch'" in found[1]
