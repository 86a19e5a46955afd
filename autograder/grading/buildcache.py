"""The reference's Triton builds, kept across gradings, for the kernels of a submission that are the same.

A compile check's build (kernels.crosscompile) costs seconds of CPU per kernel and dtype: most of a Triton
assignment's grading. Triton keys each build by a hash of the kernel's source, the sources of the @triton.jit
functions it calls and the constexpr globals it reads, its line in the file, its whole specialisation
(signature, divisibility, constexprs), its options (warps, stages), the target and the compiler's own version,
and finds a build in its cache (TRITON_CACHE_DIR) by that key. A kernel that differs in any of those is a
different key, and is compiled.

Who may write what a worker reuses: only a process that never ran a submission's code. Here that is the reference's
builds: the builds the collected compile checks ask for, answered for the reference solution (SOLUTIONS) by
kernels.crosscompile (`--request`) in a process started for it, the reference's tree on its import path. They are
kept in CACHE (default build/build-cache; $AUTOGRADER_BUILD_CACHE names another folder, `off` turns it off), the
grader's only (they show the reference), out of every sandbox's view, one folder per reference and compiler. A
grading server (`runner --serve`, a cohort) adds the builds it lacks at its first need; a single grading only uses
what is there. Each worker that builds, where it runs as a user of its own, gets a copy in its own Triton cache
before any of the submission's code has run in it, which it can use but not list (seed): what its code does there
stays in that submission, and nothing of the reference is shown to it.

Compilation runs Python of the kernel's author (a constexpr function, a static assert's message), so a
submission's own builds are never kept: a submission whose kernel is the reference's, byte for byte where
Triton hashes it, takes the reference's build; every other kernel is compiled in its own grading, as before.
In a cohort that is the kernels copied unchanged (the stubs give none whole); in the course's own test suite
and bench, the reference and its mistakes, which share most kernels.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
VARIABLE = "AUTOGRADER_BUILD_CACHE"
CACHE = ROOT / "build" / "build-cache"
TRITON_CACHE = ".triton"  # a worker's Triton cache in its scratch folder (sandbox.bwrap.worker_env)
WARM_TIMEOUT = 1800.0  # wall seconds for the reference's builds: minutes on a busy machine
INDEX = "requests.json"  # in a folder of the reference's builds: the requests whose builds it holds


def cache_root() -> Path | None:
    """Where the reference's builds are kept; None where turned off."""
    chosen = os.environ.get(VARIABLE, "")
    if chosen.lower() in ("off", "0", "no", "never"):
        return None
    return Path(chosen) if chosen else CACHE


def requests_of(calls: list) -> list[dict]:
    """The compile requests of planned scenario calls (autograder.grading.ahead.planned), each once: a scenario
    that builds says which by its `requests` attribute (its keyword arguments to the requests)."""
    found: list[dict] = []
    for scenario, kwargs in calls:
        of = getattr(scenario, "requests", None)
        for request in of(**kwargs) if callable(of) else ():
            if request not in found:
                found.append(request)
    return found


def _packages(requests: list[dict]) -> list[str]:
    modules = [r["module"] for r in requests if "module" in r]
    modules += [c["module"] for r in requests for c in r.get("calls", ())]
    return sorted({m.split(".")[0] for m in modules})


def _digest(reference: Path) -> str:
    """What the reference's builds depend on besides the requests and what Triton's own keys hold: the
    reference's and the course library's sources, and the compiler's version."""
    digest = hashlib.sha256()
    for name in ("triton", "torch"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            digest.update(f"{name}={metadata.version(name)}".encode())
    for top in (reference, ROOT / "kernels"):
        for path in sorted(top.rglob("*.py")):
            digest.update(str(path.relative_to(top)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def reference_builds(requests: list[dict], make: bool, reference: Path = SOLUTIONS) -> tuple[Path | None, float]:
    """(The folder of Triton cache entries of the reference's builds, the CPU seconds spent here making them).

    One folder per reference and compiler holds the builds of every request made so far: where `make`, those of
    `requests` it lacks are made now (under a lock other graders wait on) and added; without `make`, it is given
    as it is (a kernel without a build there is compiled in its grading). None where there is none: turned off,
    no reference or builds, nothing made yet, or its making failed (then every build is compiled in its
    grading, as without this cache)."""
    root = cache_root()
    if root is None or not requests or not reference.is_dir() \
            or not all((reference / p).is_dir() for p in _packages(requests)):
        return None, 0.0
    done = root / f"reference-{_digest(reference)}"
    if not make or not _missing(done, requests):
        return (done if done.is_dir() else None), 0.0
    before = _children_cpu()
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(root / f"{done.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            missing = _missing(done, requests)
            if missing:
                _make(missing, reference, root, done)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        print(f"the reference's builds were not made ({type(exc).__name__}: {exc}); each grading compiles its own",
              file=sys.stderr)
    return (done if done.is_dir() else None), _children_cpu() - before


def _held(done: Path) -> list[dict]:
    """The requests whose builds the folder holds (its INDEX)."""
    try:
        held = json.loads((done / INDEX).read_text())
    except (OSError, ValueError):
        return []
    return held if isinstance(held, list) else []


def _missing(done: Path, requests: list[dict]) -> list[dict]:
    held = _held(done)
    return [r for r in requests if r not in held]


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _make(requests: list[dict], reference: Path, root: Path, done: Path) -> None:
    """Answer the requests for the reference in a process of their own, then move each build of its Triton cache
    into `done` (a rename, so that a grader copying the folder meanwhile sees each build whole or not at all),
    and add the requests to its index last."""
    new = not done.is_dir()
    with tempfile.TemporaryDirectory(prefix="making-", dir=root) as work:
        work_path = Path(work)
        inbox, outbox, cache = work_path / "request.json", work_path / "answer.json", work_path / "triton"
        inbox.write_text(json.dumps({"requests": requests}))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8",
               "PYTHONPATH": f"{ROOT}{os.pathsep}{reference}", "PYTHONDONTWRITEBYTECODE": "1",
               "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(cache)}
        done_process = subprocess.run([sys.executable, "-s", "-m", "kernels.crosscompile", "--request", str(inbox),
                                       "--out", str(outbox)], env=env, cwd=work, capture_output=True, text=True,
                                      timeout=WARM_TIMEOUT)
        if done_process.returncode != 0 or not outbox.exists():
            raise ValueError(f"the compiler process ended with {done_process.returncode}: "
                             f"{(done_process.stderr or done_process.stdout)[-500:]}")
        answers = json.loads(outbox.read_text()).get("answers", [])
        if len(answers) != len(requests):
            raise ValueError("the compiler process gave no answer for some of the reference's builds")
        done.mkdir(mode=0o700, exist_ok=True)
        done.chmod(0o700)
        for entry in sorted(cache.iterdir()) if cache.is_dir() else ():
            for path in (entry, *entry.rglob("*")):  # the grader's only: they show the reference
                path.chmod(0o700 if path.is_dir() else 0o600)
            if entry.is_dir() and not (done / entry.name).exists():
                entry.rename(done / entry.name)
        index = work_path / INDEX
        index.write_text(json.dumps(_held(done) + requests))
        index.chmod(0o600)
        index.rename(done / INDEX)
    if new:  # the builds of an older reference, course library or compiler, and their locks
        for old in root.glob("reference-*"):
            if old.is_dir() and old != done:
                shutil.rmtree(old, ignore_errors=True)
            elif old.suffix == ".lock" and old.stem != done.name:
                old.unlink(missing_ok=True)


def seed(builds: Path | None, scratch: Path, inside: str, own_user: bool) -> int:
    """Copy the reference's builds into the Triton cache of the worker whose scratch folder is `scratch` (`inside`
    as the worker sees it), before any code of the submission has run there; the number of builds copied.

    The builds would show the reference to whoever can list them (its Triton IR names its variables, lines and
    files), so they are given only to a worker that runs as a user of its own (`own_user`: a forked worker, or
    user mode), and it cannot list them. Its cache folder belongs to the grader, mode 1733: the worker may add
    its own builds there, never list, rename or remove the grader's. It reaches a build only by Triton's key,
    which only the reference's own source gives; each build's folder is 0711, its files 0644. A worker that runs
    as the grader's own user (a single grading under bubblewrap) is given none. Made here, the cache folder
    cannot be a link the submission placed: where it already exists, nothing is copied.

    Triton's entry of a build names its files by absolute path (its `__grp__` file): those name the worker's
    copy. Every file copied is dated 1970, so that what the worker compiles itself (compiled) stands out."""
    if builds is None or not own_user or not builds.is_dir() or not scratch.is_dir() or scratch.is_symlink():
        return 0
    cache = scratch / TRITON_CACHE
    try:
        cache.mkdir(mode=0o700)
    except OSError:
        return 0
    try:
        shutil.copytree(builds, cache, dirs_exist_ok=True, symlinks=True, ignore=shutil.ignore_patterns(INDEX))
        for group in cache.glob("*/__grp__*.json"):
            found = json.loads(group.read_text())
            found["child_paths"] = {name: f"{inside}/{TRITON_CACHE}/{group.parent.name}/{Path(path).name}"
                                    for name, path in found.get("child_paths", {}).items()}
            group.write_text(json.dumps(found))
        for path in cache.rglob("*"):
            os.chmod(path, 0o711 if path.is_dir() else 0o644, follow_symlinks=False)
            if not path.is_dir():
                os.utime(path, ns=(0, 0), follow_symlinks=False)
        cache.chmod(0o1733)
    except (OSError, ValueError) as exc:
        print(f"the reference's builds were not given to the worker ({exc}); it compiles its own", file=sys.stderr)
        shutil.rmtree(cache, ignore_errors=True)
        return 0
    return sum(1 for p in cache.iterdir() if p.is_dir())


def compiled(scratch: Path) -> int:
    """How many builds the worker compiled, seen from outside once it stopped: the entries of its Triton cache
    with a file written after seed() (the submission could fake this count only for its own grading's log)."""
    cache = scratch / TRITON_CACHE
    if cache.is_symlink() or not cache.is_dir():
        return 0
    with contextlib.suppress(OSError):
        return sum(1 for entry in cache.iterdir() if entry.is_dir() and not entry.is_symlink()
                   and any(f.lstat().st_mtime_ns != 0 for f in entry.iterdir()))
    return 0


def every_request(assignments: list[str]) -> list[dict]:
    """The compile requests of every build check of these assignments' suites (their test_gpu_compile.py's
    BUILD_CHECKS, each asking BUILD_SCENARIO for its build_call), in each build dtype, for the course GPU: what a
    grading of the whole suite asks for."""
    import importlib

    calls = []
    for name in assignments:
        try:
            checks = importlib.import_module(f"autograder.suites.{name}.test_gpu_compile")
        except ModuleNotFoundError:
            continue
        calls += [(checks.BUILD_SCENARIO, checks.build_call(kind, dtype)) for kind in checks.BUILD_CHECKS.values()
                  for dtype in checks.scenarios.BUILD_DTYPES]
    return requests_of(calls)


def main(argv: list[str] | None = None) -> int:
    """`python -m autograder.grading.buildcache`: make the reference's builds of every compile check now (before a
    cohort, or into an image whose every grading is a single one), where they are not made yet."""
    import argparse

    from kernels import impl

    parser = argparse.ArgumentParser(prog="python -m autograder.grading.buildcache", description=main.__doc__)
    parser.add_argument("--assignments", help="comma-separated (default: every assignment of the reference)")
    args = parser.parse_args(argv)
    chosen = args.assignments.split(",") if args.assignments else impl.packages(SOLUTIONS) if SOLUTIONS.is_dir() else []
    requests = every_request(chosen)
    if cache_root() is None:
        print(f"the reference's builds are turned off (${VARIABLE})")
        return 0
    folder, cpu = reference_builds(requests, make=True)
    if folder is None:
        print("no builds were made: no reference, no compile checks, or their making failed (above)", file=sys.stderr)
        return 1 if requests else 0
    made = f"made now in {cpu:.1f} CPU s" if cpu else "made before"
    print(f"the reference's builds of {len(requests)} compile requests: "
          f"{sum(1 for p in folder.iterdir() if p.is_dir())} in {folder} ({made})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
