"""Code similarity across a cohort, with copydetect (winnowing over tokens, MIT).

    python -m autograder similarity submissions/ --out out [--threshold 0.6] [--public known/]

Each submission is opened as `autograder batch` opens it (autograder.grading.intake: folders and zips,
unsafe entries refused), then compared per assignment and per module file: alice's flops.py with
bob's flops.py. copydetect tokenises each file with Pygments and replaces names by one letter, so
renamed variables and reordered functions still match; its fingerprints of the student stubs
(assignments/<assignment>/, the given code included) are boilerplate and are removed first, so a
shared skeleton never counts as a match. With `--public`, each submission is also compared with a
folder of known public solutions (one package layout, or a folder of them like DIR).

A pair is listed when either side's share of matching tokens reaches the threshold and the match
covers at least `min_tokens` filtered tokens (two honest one-line answers may well coincide).
Results: out/similarity.csv, one row per listed pair, and out/report/similarity.html, the matching
regions highlighted side by side (copydetect's highlighting, on escaped code; the page itself is
rendered by Jinja2 with autoescape, so a file name or a line of code cannot inject HTML).
"""

from __future__ import annotations

import csv
import io
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import highlight_overlap
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from autograder.cohort.batch import BatchError, submission_entries
from autograder.grading.intake import open_submission

ROOT = Path(__file__).resolve().parents[2]
STUBS = ROOT / "assignments"
TEMPLATE = "similarity_page.html"
THRESHOLD = 0.6  # share of a file's tokens found in the other file
NOISE = 25  # copydetect's noise threshold: matches shorter than this many filtered characters are ignored
GUARANTEE = 30  # copydetect's guarantee threshold: matches this long are always found
MIN_TOKENS = 100  # filtered characters a listed match must cover at least
CONTEXT_LINES = 10  # lines shown around each highlighted region
PUBLIC = "known: "  # prefix of the known public solutions' names


class SimilarityError(Exception):
    """The comparison cannot start: the folder is missing or holds no submission."""


@dataclass(frozen=True)
class Pair:
    assignment: str
    file: str  # the module's path inside the assignment package, e.g. "flops.py"
    first: str
    second: str
    first_similarity: float  # the share of first's tokens that match second
    second_similarity: float
    tokens: int  # matching tokens (copydetect's filtered characters)
    first_code: Markup = field(repr=False, compare=False, default=Markup(""))
    second_code: Markup = field(repr=False, compare=False, default=Markup(""))

    @property
    def similarity(self) -> float:
        return max(self.first_similarity, self.second_similarity)


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
            min_tokens: int = MIN_TOKENS, stubs: Path = STUBS) -> Comparison:
    """Compare every pair of submissions in `directory` (and each with `public`), file by file."""
    directory = Path(directory)
    if not 0 < threshold <= 1:
        raise SimilarityError(f"the threshold is a share of matching tokens, in (0, 1]; got {threshold}")
    packages = sorted(p.parent.name for p in Path(stubs).glob("*/__init__.py"))
    with tempfile.TemporaryDirectory(prefix="similarity-") as stage:
        sources, skipped = _read_cohort(directory, packages, Path(stage))
        known = _read_public(Path(public), packages, Path(stage)) if public is not None else {}
    if not sources:
        why = "; ".join(f"{name}: {reason}" for name, reason in skipped.items())
        raise SimilarityError(f"{directory} holds no submission to compare (one folder or .zip per submission)"
                              + (f": {why}" if why else ""))
    pairs = []
    for assignment in packages:
        boilerplate = _boilerplate(Path(stubs) / assignment)
        for rel in sorted({rel for files in [*sources.values(), *known.values()] for (a, rel) in files
                           if a == assignment}):
            pairs += _compare_file(assignment, rel, sources, known, boilerplate, threshold, min_tokens)
    pairs.sort(key=lambda p: (-p.similarity, p.assignment, p.file, p.first, p.second))
    return Comparison(pairs, sorted(sources), sorted(known), sum(len(f) for f in sources.values()), skipped,
                      threshold, min_tokens)


Files = dict[tuple[str, str], str]  # (assignment, module path inside it) -> source text


def _read_cohort(directory: Path, packages: list[str], stage: Path) -> tuple[dict[str, Files], dict[str, str]]:
    if not directory.is_dir():
        raise SimilarityError(f"{directory} is not a folder: give the folder of submissions that `autograder "
                              "batch` takes (one folder or .zip per submission)")
    try:
        entries, _ = submission_entries(directory)
    except BatchError as exc:
        raise SimilarityError(str(exc)) from None
    sources, skipped = {}, {}
    for name, entry in entries.items():
        files, why = _read_submission(entry, packages, stage / "cohort" / str(len(sources) + len(skipped)))
        if files:
            sources[name] = files
        else:
            skipped[name] = why
    return sources, skipped


def _read_public(folder: Path, packages: list[str], stage: Path) -> dict[str, Files]:
    """Known solutions: `folder` itself when it has the package layout, else each of its entries."""
    if not folder.is_dir():
        raise SimilarityError(f"{folder} (--public) is not a folder: give a package layout (e.g. a checkout of a "
                              "published solution) or a folder of them")
    if any((folder / p).is_dir() for p in packages):
        files, why = _read_submission(folder, packages, stage / "public")
        if not files:
            raise SimilarityError(f"{folder} (--public): nothing to compare: {why}")
        return {PUBLIC + folder.name: files}
    found, _ = _read_cohort(folder, packages, stage / "public")
    if not found:
        raise SimilarityError(f"{folder} (--public) holds no package layout, nor folders or zips that have one")
    return {PUBLIC + name: files for name, files in found.items()}


def _read_submission(entry: Path, packages: list[str], stage: Path) -> tuple[Files, str]:
    """The .py files of a submission's packages, read through open_submission (never by hand)."""
    sub = open_submission(entry, stage, packages)
    files = {}
    for package in sub.packages:
        for path in sorted((sub.root / package).rglob("*.py")):
            files[(package, path.relative_to(sub.root / package).as_posix())] = path.read_text(encoding="utf-8")
    return files, "; ".join(sub.problems) or "no .py file in its packages"


def _fingerprint(name: str, text: str, boilerplate=None, window: int = GUARANTEE - NOISE + 1) -> CodeFingerprint:
    # copydetect picks the tokeniser from the name's suffix; the text comes from memory, not the name.
    return CodeFingerprint(name, NOISE, window, boilerplate, fp=io.StringIO(text))


def _boilerplate(package: Path) -> np.ndarray:
    """Every fingerprint of the assignment's stubs (window 1: all k-grams, as copydetect does)."""
    hashes = [h for path in sorted(package.rglob("*.py"))
              for h in _fingerprint(path.name, path.read_text(encoding="utf-8"), window=1).hashes]
    return np.unique(np.array(hashes, dtype=np.int64))


def _compare_file(assignment: str, rel: str, sources: dict[str, Files], known: dict[str, Files],
                  boilerplate: np.ndarray, threshold: float, min_tokens: int) -> list[Pair]:
    key = (assignment, rel)
    suffix = PurePosixPath(rel).name
    prints = {name: _fingerprint(suffix, files[key], boilerplate)
              for name, files in [*sources.items(), *known.items()] if key in files}
    students = sorted(n for n in prints if n in sources)
    others = {first: [n for n in students if n > first] + sorted(n for n in prints if n in known)
              for first in students}
    pairs = []
    for first in students:
        for second in others[first]:
            tokens, (sim1, sim2), (slices1, slices2) = compare_files(prints[first], prints[second])
            if tokens < min_tokens or max(sim1, sim2) < threshold:
                continue
            pairs.append(Pair(assignment, rel, first, second, float(sim1), float(sim2), int(tokens),
                              _highlight(prints[first].raw_code, slices1),
                              _highlight(prints[second].raw_code, slices2)))
    return pairs


def _highlight(code: str, slices: np.ndarray) -> Markup:
    """The code, HTML-escaped by copydetect, with the matching regions in <mark>."""
    marked, _ = highlight_overlap(code, slices, "<mark>", "</mark>", truncate=CONTEXT_LINES, escape_html=True)
    return Markup(marked)


def write(comparison: Comparison, out: Path) -> tuple[Path, Path]:
    """out/similarity.csv and out/report/similarity.html; return both paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = out / "similarity.csv"
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["assignment", "file", "first", "second", "first_similarity", "second_similarity",
                         "matched_tokens"])
        for p in comparison.pairs:
            writer.writerow([p.assignment, p.file, p.first, p.second, f"{p.first_similarity:.3f}",
                             f"{p.second_similarity:.3f}", p.tokens])
    page = out / "report" / "similarity.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    environment = Environment(loader=FileSystemLoader(Path(__file__).parent), autoescape=select_autoescape(["html"]))
    html = environment.get_template(TEMPLATE).render(
        c=comparison, noise=NOISE, guarantee=GUARANTEE, index=(page.parent / "index.html").is_file())
    page.write_text(html, encoding="utf-8")
    return table, page

