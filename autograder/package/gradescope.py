"""Gradescope: one autograder zip per assignment, for Gradescope's "zip file upload" configuration.

    python -m autograder.package.gradescope dist/gradescope        # dist/gradescope/<assignment>.zip

The zip holds setup.sh (run once to build Gradescope's image: Debian's bubblewrap, a virtual
environment, `pip install torch==2.13.0`, then requirements.txt) and run_autograder (run per
submission: `python -m autograder grade /autograder/submission --assignment <a> --out
/autograder/results`), beside the trusted grader for that one assignment: autograder/ with only its
hidden suite, kernels/, its reference solution, its stubs and public tests, the root conftest.py and
pyproject.toml. The zip's bytes depend only on those files (layout.write_zip).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import tomllib
from pathlib import Path

from autograder.package.layout import (ROOT, assignments, copy, files_of, public_tests, reset, write_text,
                                       write_zip)

TEMPLATES = Path(__file__).with_name("templates")
# Of the instructor extras, the grader needs only nbformat (to read notebook submissions).
GRADER_EXTRAS = ("nbformat",)


def grader_files(assignment: str) -> list[str]:
    """The repository files the trusted grader needs to grade one assignment."""
    others = [f"autograder/suites/{name}/" for name in assignments() if name != assignment]
    grader = [rel for rel in files_of("autograder") if not rel.startswith(tuple(others))]
    course = ["grading.toml"] if (ROOT / "grading.toml").is_file() else []  # the late policy, where the course has one
    return grader + [*public_tests([assignment]), "kernels", f"solutions/{assignment}", f"assignments/{assignment}",
                     "conftest.py", "pyproject.toml", *course]


def requirements() -> str:
    """The grader's dependencies, one per line: the project's, and the instructor extras it needs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = [d for d in project["optional-dependencies"]["instructor"]
              if re.match(r"[A-Za-z0-9_.-]+", d).group(0).lower() in GRADER_EXTRAS]
    return "\n".join(project["dependencies"] + extras) + "\n"


def stage(assignment: str, folder: Path) -> None:
    """Lay out the zip's contents in folder."""
    copy(grader_files(assignment), folder)
    write_text(folder / "requirements.txt", requirements())
    write_text(folder / "setup.sh", (TEMPLATES / "setup.sh").read_text(encoding="utf-8"), executable=True)
    script = (TEMPLATES / "run_autograder").read_text(encoding="utf-8").replace("@ASSIGNMENT@", assignment)
    write_text(folder / "run_autograder", script, executable=True)


def build(dest: Path) -> list[Path]:
    """Write dest/<assignment>.zip for every assignment (dest emptied first); return the zips."""
    reset(dest)
    zips = []
    for name in assignments():
        with tempfile.TemporaryDirectory(prefix="llmsys-gradescope-") as tmp:
            stage(name, Path(tmp))
            write_zip(Path(tmp), dest / f"{name}.zip")
        zips.append(dest / f"{name}.zip")
    return zips


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="where to write the zips (emptied first)")
    args = parser.parse_args(argv)
    for path in build(args.dest):
        print(f"wrote {path} ({path.stat().st_size >> 10} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
