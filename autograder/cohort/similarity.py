"""Code similarity across a cohort, with copydetect (winnowing over tokens, MIT).

    python -m autograder similarity submissions/ --out out [--threshold 0.6] [--public known/]

Each submission is opened as `autograder batch` opens it (autograder.grading.intake: folders and zips,
unsafe entries refused), then compared per assignment, across files: each file of one submission with
the other submission's code for that assignment as one document (its .py files joined in the order of
their paths). So alice's flops.py is found in bob's submission wherever bob put it: in a private
`_flops_impl.py` behind a one-line re-export, split over several modules, merged with network.py into
one, or renamed. That is why a file is compared with a whole submission rather than a whole submission
with a whole submission (a copy of one module in an otherwise honest submission would be a small share
of all of it) or every file with every file (a module split over three files would be a third in each
comparison, merged modules likewise). A copy can be padded with code of its own, but the copied file
is still found whole in it: either side's share counts.

copydetect tokenises the code with Pygments and replaces names by one letter, so renamed variables and
reordered functions still match; its fingerprints of the student stubs (assignments/<assignment>/, the
given code included) are boilerplate and are removed first, so a shared skeleton never counts as a
match. With `--public`, each submission is also compared with a folder of known public solutions (one
package layout, or a folder of them like DIR). The command compares each submission with the course's own
reference solution too (solutions/, or `--reference DIR`; `--no-reference` leaves it out): a pair with it is
named REFERENCE, so a copy of the reference says so.

A pair of submissions is listed for an assignment when some file of either one has at least
`threshold` of its tokens in the other's code, a match of at least `min_tokens` filtered tokens (two
honest one-line answers may well coincide). One row per pair and assignment: the highest such share,
the share of each submission's whole code found in the other's, and the files involved on both sides
(those found in the other's code, and those holding what was found), each with its own share.
Results: out/similarity.csv and out/report/similarity.html, the matching regions of each file involved
highlighted side by side (copydetect's highlighting, on escaped code; the page itself is rendered by
Jinja2 with autoescape, so a file name or a line of code cannot inject HTML). Both list the pairs by
similarity, then by assignment and names; the same input gives the same bytes (see compare).
"""

from __future__ import annotations

import csv
import io
import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import highlight_overlap
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from autograder.cohort.batch import BatchError, submission_entries
from autograder.grading.intake import open_submission
from autograder.report.text import safe_cell

ROOT = Path(__file__).resolve().parents[2]
STUBS = ROOT / "assignments"
TEMPLATE = "similarity_page.html"
THRESHOLD = 0.6  # share of a file's tokens found in the other submission's code
NOISE = 25  # copydetect's noise threshold: matches shorter than this many filtered characters are ignored
GUARANTEE = 30  # copydetect's guarantee threshold: matches this long are always found
MIN_TOKENS = 100  # filtered characters a listed match must cover at least
CONTEXT_LINES = 10  # lines shown around each highlighted region
PUBLIC = "known: "  # prefix of the known public solutions' names
REFERENCE = "the reference solution"  # the name of the course's reference in a pair (compare's `reference`)
HASH_SEED = "0"  # PYTHONHASHSEED of the process that fingerprints (see compare)
CHILD = "from autograder.cohort.similarity import serve; serve()"


class SimilarityError(Exception):
    """The comparison cannot start: the folder is missing or holds no submission."""


class Found(NamedTuple):
    """One file of a listed pair, with the share of its tokens found in the other submission's code."""

    file: str  # the module's path inside the assignment package, e.g. "flops.py"
    share: float
    code: Markup = Markup("")  # the file, escaped, its matching regions in <mark> (for the page)


@dataclass(frozen=True)
class Pair:
    """Two submissions' code for one assignment, listed because a file of one is found in the other."""

    assignment: str
    first: str
    second: str
    similarity: float  # the highest share of one file's tokens found in the other submission's code
    first_similarity: float  # the share of first's whole code (its files joined) that matches second's
    second_similarity: float
    tokens: int  # matching tokens between the two submissions' code (copydetect's filtered characters)
    first_files: tuple[Found, ...] = field(compare=False)  # first's files involved, by path
    second_files: tuple[Found, ...] = field(compare=False)


@dataclass
class Comparison:
    pairs: list[Pair]
    submissions: list[str]
    public: list[str]
    files: int  # module files compared, over all submissions
    skipped: dict[str, str]  # submission -> why nothing of it was compared
    threshold: float
    min_tokens: int


def compare(directory: Path, public: Path | None = None, threshold: float = THRESHOLD,
            min_tokens: int = MIN_TOKENS, stubs: Path = STUBS, reference: Path | None = None) -> Comparison:
    """Compare every pair of submissions in `directory` (and each with `public`, and with the package layout
    `reference`, named REFERENCE), each file of one with the other's whole code, per assignment.

    copydetect fingerprints a k-gram with Python's built-in hash() (copydetect.utils.hashed_kgrams), which
    is salted per process (PYTHONHASHSEED): winnowing then keeps other fingerprints, and the same cohort
    gave other pairs and percentages on each run. So the comparison runs in a child interpreter started with
    PYTHONHASHSEED fixed, whatever this process's seed. That leaves copydetect as it is: no copy of its
    code, no patched module global (which would also change hash() for anything else in this process, and
    would silently stop working should copydetect hash another way), and any other use of str hashes on
    its path (sets, dict order) is fixed too. The cost is one interpreter start per comparison.
    """
    if not 0 < threshold <= 1:
        raise SimilarityError(f"the threshold is a share of matching tokens, in (0, 1]; got {threshold}")
    request = {"directory": Path(directory), "public": None if public is None else Path(public),
               "threshold": threshold, "min_tokens": min_tokens, "stubs": Path(stubs),
               "reference": None if reference is None else Path(reference)}
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="similarity-child-") as folder:
        asked, answer = Path(folder) / "request.pickle", Path(folder) / "answer.pickle"
        asked.write_bytes(pickle.dumps(request))
        child = subprocess.run([sys.executable, "-c", CHILD, str(asked), str(answer)], capture_output=True,
                               text=True, env=os.environ | {"PYTHONHASHSEED": HASH_SEED, "PYTHONPATH": path})
        if child.returncode != 0 or not answer.is_file():
            raise RuntimeError(f"{__name__}.compare: its child process (PYTHONHASHSEED={HASH_SEED}) failed with "
                               f"exit code {child.returncode}; its output:\n{child.stderr[-3000:]}")
        outcome = pickle.loads(answer.read_bytes())
    if isinstance(outcome, SimilarityError):
        raise SimilarityError(str(outcome))
    return outcome


def serve() -> None:
    """The child's side of compare: `python -c "...serve()" REQUEST ANSWER` (pickles of our own making)."""
    if sys.flags.hash_randomization:
        raise SystemExit(f"{__name__}.serve: run it with PYTHONHASHSEED={HASH_SEED}, as compare does")
    asked, answer = map(Path, sys.argv[1:3])
    try:
        outcome = _compare(**pickle.loads(asked.read_bytes()))
    except SimilarityError as exc:
        outcome = exc
    answer.write_bytes(pickle.dumps(outcome))


def _compare(directory: Path, public: Path | None, threshold: float, min_tokens: int, stubs: Path,
             reference: Path | None = None) -> Comparison:
    packages = sorted(p.parent.name for p in stubs.glob("*/__init__.py"))
    with tempfile.TemporaryDirectory(prefix="similarity-") as stage:
        sources, skipped = _read_cohort(directory, packages, Path(stage))
        known = _read_public(public, packages, Path(stage)) if public is not None else {}
        if reference is not None:
            code, why = _read_submission(reference, packages, Path(stage) / "reference")
            if not code:
                raise SimilarityError(f"{reference} (the reference solution): nothing to compare: {why}; give the "
                                      "package layout with --reference, or --no-reference")
            known[REFERENCE] = code
    if not sources:
        why = "; ".join(f"{name}: {reason}" for name, reason in sorted(skipped.items()))
        raise SimilarityError(f"{directory} holds no submission to compare (one folder or .zip per submission)"
                              + (f": {why}" if why else ""))
    pairs = []
    for assignment in packages:
        boilerplate = _boilerplate(stubs / assignment)
        prints = {name: Prints(code[assignment], boilerplate)
                  for name, code in [*sources.items(), *known.items()] if code.get(assignment)}
        students = sorted(n for n in prints if n in sources)
        for first in students:
            for second in [n for n in students if n > first] + sorted(n for n in prints if n in known):
                pair = _compare_pair(assignment, first, prints[first], second, prints[second], threshold, min_tokens)
                pairs += [pair] if pair is not None else []
    pairs.sort(key=lambda p: (-p.similarity, p.assignment, p.first, p.second))
    return Comparison(pairs, sorted(sources), sorted(known),
                      sum(len(files) for code in sources.values() for files in code.values()),
                      dict(sorted(skipped.items())), threshold, min_tokens)


Code = dict[str, dict[str, str]]  # assignment -> module path inside it -> source text


def _read_cohort(directory: Path, packages: list[str], stage: Path) -> tuple[dict[str, Code], dict[str, str]]:
    if not directory.is_dir():
        raise SimilarityError(f"{directory} is not a folder: give the folder of submissions that `autograder "
                              "batch` takes (one folder or .zip per submission)")
    try:
        entries, _ = submission_entries(directory)
    except BatchError as exc:
        raise SimilarityError(str(exc)) from None
    sources, skipped = {}, {}
    for name, entry in entries.items():
        code, why = _read_submission(entry, packages, stage / "cohort" / str(len(sources) + len(skipped)))
        if code:
            sources[name] = code
        else:
            skipped[name] = why
    return sources, skipped


def _read_public(folder: Path, packages: list[str], stage: Path) -> dict[str, Code]:
    """Known solutions: `folder` itself when it has the package layout, else each of its entries."""
    if not folder.is_dir():
        raise SimilarityError(f"{folder} (--public) is not a folder: give a package layout (e.g. a checkout of a "
                              "published solution) or a folder of them")
    if any((folder / p).is_dir() for p in packages):
        code, why = _read_submission(folder, packages, stage / "public")
        if not code:
            raise SimilarityError(f"{folder} (--public): nothing to compare: {why}")
        return {PUBLIC + folder.name: code}
    found, _ = _read_cohort(folder, packages, stage / "public")
    if not found:
        raise SimilarityError(f"{folder} (--public) holds no package layout, nor folders or zips that have one")
    return {PUBLIC + name: code for name, code in found.items()}


def _read_submission(entry: Path, packages: list[str], stage: Path) -> tuple[Code, str]:
    """The .py files of a submission's packages, read through open_submission (never by hand)."""
    sub = open_submission(entry, stage, packages)
    code = {}
    for package in sub.packages:
        files = {path.relative_to(sub.root / package).as_posix(): path.read_text(encoding="utf-8")
                 for path in sorted((sub.root / package).rglob("*.py"))}
        if files:
            code[package] = files
    return code, "; ".join(sub.problems) or "no .py file in its packages"


def _fingerprint(text: str, boilerplate=None, window: int = GUARANTEE - NOISE + 1) -> CodeFingerprint:
    # copydetect picks the tokeniser from the name's suffix (Python); the text comes from memory.
    return CodeFingerprint("code.py", NOISE, window, boilerplate, fp=io.StringIO(text))


def _boilerplate(package: Path) -> np.ndarray:
    """Every fingerprint of the assignment's stubs (window 1: all k-grams, as copydetect does)."""
    hashes = [h for path in sorted(package.rglob("*.py"))
              for h in _fingerprint(path.read_text(encoding="utf-8"), window=1).hashes]
    return np.unique(np.array(hashes, dtype=np.int64))


class Prints:
    """One submission's code for one assignment: each file fingerprinted alone, and all of them joined in
    the order of their paths (`whole`), with where each file starts in the joined text."""

    SEPARATOR = "\n\n"

    def __init__(self, files: dict[str, str], boilerplate: np.ndarray) -> None:
        self.texts = dict(sorted(files.items()))
        self.files = {rel: _fingerprint(text, boilerplate) for rel, text in self.texts.items()}
        self.starts, at = {}, 0
        for rel, text in self.texts.items():
            self.starts[rel], at = at, at + len(text) + len(self.SEPARATOR)
        self.whole = _fingerprint(self.SEPARATOR.join(self.texts.values()), boilerplate)

    def marked(self, rel: str, slices: np.ndarray) -> Markup:
        """The file, escaped, with the parts of `slices` (in the joined text) that fall in it in <mark>."""
        at, text = self.starts[rel], self.texts[rel]
        inside = [(max(s, at) - at, min(e, at + len(text)) - at) for s, e in zip(*slices)
                  if s < at + len(text) and e > at]
        if not inside:
            return escape(text)
        marked, _ = highlight_overlap(text, np.array(inside).T, "<mark>", "</mark>", truncate=CONTEXT_LINES,
                                      escape_html=True)
        return Markup(marked)


def _found(prints: Prints, other: Prints, threshold: float,
           min_tokens: int) -> tuple[dict[str, float], set[str], set[str]]:
    """Each file of `prints` with the share of its tokens found in `other`'s whole code; the files found
    there (at least `threshold` of their tokens, a match of `min_tokens` at least); and the files of
    `other` that hold them (`min_tokens` of theirs match the files found: an idiom met by chance is not
    enough)."""
    shares, found = {}, set()
    for rel, fingerprint in prints.files.items():
        tokens, (share, _), _ = compare_files(fingerprint, other.whole)
        shares[rel] = float(share)
        if share >= threshold and tokens >= min_tokens:
            found.add(rel)
    held = {rel: sum(compare_files(fingerprint, prints.files[f])[0] for f in found)
            for rel, fingerprint in other.files.items()}
    return shares, found, {rel for rel, tokens in held.items() if tokens >= min_tokens}


def _compare_pair(assignment: str, first: str, one: Prints, second: str, two: Prints, threshold: float,
                  min_tokens: int) -> Pair | None:
    """The pair's row, or None when no file of either is found in the other's code."""
    shares_one, found_one, holding_two = _found(one, two, threshold, min_tokens)
    shares_two, found_two, holding_one = _found(two, one, threshold, min_tokens)
    if not found_one and not found_two:
        return None
    tokens, (sim1, sim2), (slices1, slices2) = compare_files(one.whole, two.whole)
    similarity = max([shares_one[rel] for rel in found_one] + [shares_two[rel] for rel in found_two])
    return Pair(assignment, first, second, similarity, float(sim1), float(sim2), int(tokens),
                tuple(Found(rel, shares_one[rel], one.marked(rel, slices1)) for rel in sorted(found_one | holding_one)),
                tuple(Found(rel, shares_two[rel], two.marked(rel, slices2)) for rel in sorted(found_two | holding_two)))


def write(comparison: Comparison, out: Path) -> tuple[Path, Path]:
    """out/similarity.csv and out/report/similarity.html; return both paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = out / "similarity.csv"
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["assignment", "first", "second", "similarity", "first_similarity", "second_similarity",
                         "matched_tokens", "first_files", "second_files"])
        for p in comparison.pairs:  # names are the students': a spreadsheet must show them as text
            writer.writerow([p.assignment, safe_cell(p.first), safe_cell(p.second), f"{p.similarity:.3f}",
                             f"{p.first_similarity:.3f}", f"{p.second_similarity:.3f}", p.tokens,
                             safe_cell(_listed(p.first_files)), safe_cell(_listed(p.second_files))])
    page = out / "report" / "similarity.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    environment = Environment(loader=FileSystemLoader(Path(__file__).parent), autoescape=select_autoescape(["html"]))
    html = environment.get_template(TEMPLATE).render(
        c=comparison, noise=NOISE, guarantee=GUARANTEE, index=(page.parent / "index.html").is_file())
    page.write_text(html, encoding="utf-8")
    return table, page


def _listed(files: tuple[Found, ...]) -> str:
    """e.g. "_flops_impl.py 100%; flops.py 0%": each file involved, with its share found in the other's code."""
    return "; ".join(f"{f.file} {f.share:.0%}" for f in files)

