"""The reference's Triton builds, kept across gradings, for the kernels of a submission that are the same.

A compile check's build (kernels.crosscompile) costs seconds of CPU per kernel and dtype: most of a Triton
assignment's grading. Triton keys each build by a hash of the kernel's source, the sources of the @triton.jit
functions it calls and the constexpr globals it reads, its line in the file, its whole specialisation
(signature, divisibility, constexprs), its options (warps, stages), the target and the compiler's own version,
and finds a build in its cache (TRITON_CACHE_DIR) by that key. A kernel that differs in any of those is a
different key, and is compiled.

Who may write what a worker reuses: only a process that never ran a submission's code. Here that is the
reference's builds: the builds the collected compile checks ask for, answered for the reference solution
(SOLUTIONS) by `python -m kernels.crosscompile --request` in a process started for it, the reference's tree on
its import path. They are kept in CACHE (default build/build-cache; $AUTOGRADER_BUILD_CACHE names another
folder, `off` turns it off), out of every sandbox's view. A grading server (`runner --serve`, a cohort) makes
them at its first need, once per reference, compiler and set of builds; a single grading only uses them. Each
worker that builds gets a copy in its own Triton cache before any of the submission's code has run in it: what
its code does to the copy stays in that submission.

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


def _digest(requests: list[dict], reference: Path) -> str:
    """What the reference's builds depend on, besides what Triton's own keys hold: the requests, the reference's
    and the course library's sources, and the compiler's version."""
    digest = hashlib.sha256(json.dumps(requests, sort_keys=True).encode())
    for name in ("triton", "torch"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            digest.update(f"{name}={metadata.version(name)}".encode())
    for top in [reference / p for p in _packages(requests)] + [ROOT / "kernels"]:
        for path in sorted(top.rglob("*.py")) if top.is_dir() else ():
            digest.update(str(path.relative_to(top.parent)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def reference_builds(requests: list[dict], make: bool, reference: Path = SOLUTIONS) -> tuple[Path | None, float]:
    """(The folder of Triton cache entries of the reference's builds for `requests`, the CPU seconds spent here
    making them): made now (once, under a lock other graders wait on) where `make` and they are missing. The
    folder is None where there are none (off, no reference, no builds asked, not made yet and not `make`, or
    their making failed: then every build is compiled in its grading, as without this cache)."""
    root = cache_root()
    if root is None or not requests or not reference.is_dir() \
            or not all((reference / p).is_dir() for p in _packages(requests)):
        return None, 0.0
    name = f"{'-'.join(_packages(requests)) or 'builds'}-{_digest(requests, reference)}"
    done = root / name
    if done.is_dir() or not make:
        return (done if done.is_dir() else None), 0.0
    before = _children_cpu()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.is_dir():
                _make(requests, reference, root, done)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        print(f"the reference's builds were not made ({type(exc).__name__}: {exc}); each grading compiles its own",
              file=sys.stderr)
    return (done if done.is_dir() else None), _children_cpu() - before


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _make(requests: list[dict], reference: Path, root: Path, done: Path) -> None:
    """Answer the requests for the reference in a process of their own, then move its Triton cache into place."""
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
        if len(answers) != len(requests) or not cache.is_dir():
            raise ValueError("the compiler process gave no answer for some of the reference's builds")
        for path in (cache, *cache.rglob("*")):  # readable by every grader of this machine, written by none
            path.chmod(0o755 if path.is_dir() else 0o644)
        cache.rename(done)
    for old in root.glob(f"{done.name.rsplit('-', 1)[0]}-*"):  # an older reference's, or compiler's
        if old.is_dir() and old != done and not old.name.startswith("making-"):
            shutil.rmtree(old, ignore_errors=True)


def seed(builds: Path | None, scratch: Path, inside: str, uid: int | None = None, gid: int | None = None) -> int:
    """Copy the reference's builds into the Triton cache of the worker whose scratch folder is `scratch` (`inside`
    as the worker sees it), before any code of the submission has run there, owned by the worker's user where it
    has one (`uid`, `gid`); the number of builds copied. Made here, the cache folder cannot be a link the
    submission placed: where it already exists, nothing is copied.

    Triton's entry of a build names its files by absolute path (its `__grp__` file): those name the worker's
    copy. Every file copied is dated 1970, so that what the worker compiles itself (compiled) stands out."""
    if builds is None or not builds.is_dir() or not scratch.is_dir() or scratch.is_symlink():
        return 0
    cache = scratch / TRITON_CACHE
    try:
        cache.mkdir(mode=0o700)
    except OSError:
        return 0
    try:
        shutil.copytree(builds, cache, dirs_exist_ok=True, symlinks=True)
        for group in cache.glob("*/__grp__*.json"):
            found = json.loads(group.read_text())
            found["child_paths"] = {name: f"{inside}/{TRITON_CACHE}/{group.parent.name}/{Path(path).name}"
                                    for name, path in found.get("child_paths", {}).items()}
            group.write_text(json.dumps(found))
        for path in cache.rglob("*"):
            if not path.is_dir():
                os.utime(path, ns=(0, 0), follow_symlinks=False)
        for path in (cache, *cache.rglob("*")) if uid is not None else ():
            os.chown(path, uid, gid if gid is not None else -1, follow_symlinks=False)
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
