"""A sample cohort built from the reference: a correct submission, the bare stubs, typical mistakes
and cheats. `make grade` grades it; the grader's own tests use it as their adversarial battery.

    python -m autograder.cohort build/cohort

Mistakes are small edits of the reference (each edit must still apply: a test checks it). Cheats
start from the stubs, which honestly score zero, and add an attack; none may score more than zero.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Edit:
    path: str  # inside the tree, e.g. "resource_accounting/flops.py"
    old: str
    new: str


@dataclass(frozen=True)
class Member:
    name: str
    base: str  # "solutions" or "assignments"
    edits: tuple[Edit, ...] = ()
    cheat: str = ""  # code appended to every module of the base tree
    honest: bool = True  # False for cheats: they must score no more than the stubs


MISTAKES = (
    Member("mistake-matmul-flops", "solutions", (Edit(
        "resource_accounting/flops.py",
        'return 2 * _count("m", m) * _count("n", n) * _count("p", p)',
        'return _count("m", m) * _count("n", n) * _count("p", p)'),)),
    Member("mistake-unscaled-accumulation", "solutions", (Edit(
        "resource_accounting/training.py",
        "loss = loss_fn(model(x), y) / num_micro_batches",
        "loss = loss_fn(model(x), y)"),)),
    Member("mistake-no-checkpointing", "solutions", (Edit(
        "resource_accounting/training.py",
        "x = checkpoint(run, layers[start:start + size], x, use_reentrant=False)",
        "x = run(layers[start:start + size], x)"),)),
    Member("mistake-reentrant-checkpointing", "solutions", (Edit(
        "resource_accounting/training.py",
        "x = checkpoint(run, layers[start:start + size], x, use_reentrant=False)",
        "x = checkpoint(run, layers[start:start + size], x, use_reentrant=True)"),)),
)

# The typical mistakes of each assignment (the benchmark's cohorts, autograder/bench.py). Two of them
# are right on a CPU and wrong only for the GPU's compiler: they lose compile points alone.
MISTAKES_OF = {
    "resource_accounting": MISTAKES,
    "flash_attention": (
        Member("mistake-unrescaled-running-sum", "solutions", (Edit(
            "flash_attention/flash_pytorch.py", "l = alpha * l + p.sum(dim=-1)", "l = l + p.sum(dim=-1)"),)),
        Member("mistake-p-not-cast-for-the-dot", "solutions", (Edit(
            "flash_attention/flash_triton.py", "_dot(p.to(v.dtype), v, DOT_FP32)", "_dot(p, v, DOT_FP32)"),)),
        Member("mistake-backward-flops", "solutions", (Edit(
            "flash_attention/analysis.py", "flops *= 2.5", "flops *= 2"),)),
        Member("mistake-mask-hides-the-diagonal", "solutions", (Edit(
            "flash_attention/flash_pytorch.py", "rows[:, None] < cols[None, :]", "rows[:, None] <= cols[None, :]"),)),
    ),
    "gpu_kernels": (
        Member("mistake-tiles-rounded-down", "solutions", (Edit(
            "gpu_kernels/cost.py", "return -(-m // tile_m) * -(-n // tile_n)",
            "return (m // tile_m) * (n // tile_n)"),)),
        Member("mistake-fp32-dot", "solutions", (Edit(
            "gpu_kernels/matmul.py", "DOT_FP32=interpreted() or a.dtype == torch.float32", "DOT_FP32=True"),)),
        Member("mistake-benchmark-mean", "solutions", (Edit(
            "gpu_kernels/measure.py", "return statistics.median(times)", "return statistics.mean(times)"),)),
        Member("mistake-softmax-passes", "solutions", (Edit(
            "gpu_kernels/cost.py", "(passes + 1) * elements", "2 * elements"),)),
    ),
}

# Appended to each stub module: replace each of the module's own functions by `_cheat(its name, ...)`.
_REPLACE = """
import types as _types
for _name, _value in list(globals().items()):
    if isinstance(_value, _types.FunctionType) and _value.__module__ == __name__ and not _name.startswith("_"):
        globals()[_name] = (lambda name: lambda *args, **kwargs: _cheat(name, *args, **kwargs))(_name)
"""

CHEATS = (
    Member("cheat-exit-zero", "assignments", cheat="""
def _cheat(name, *args, **kwargs):
    import os
    os._exit(0)  # plain pytest would report success
""" + _REPLACE, honest=False),
    Member("cheat-always-equal", "assignments", cheat="""
class _Yes(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
    def __bool__(self):
        return True

def _cheat(name, *args, **kwargs):
    return _Yes(1)
""" + _REPLACE, honest=False),
    Member("cheat-patch-comparisons", "assignments", cheat="""
import builtins, math, torch, torch.testing
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
math.isclose = lambda *a, **k: True
builtins.isinstance = lambda *a, **k: True

def _cheat(name, *args, **kwargs):
    return 0
""" + _REPLACE, honest=False),
    Member("cheat-read-reference", "assignments", cheat="""
def _cheat(name, *args, **kwargs):
    # Look for the reference solution on disk (above this file, the working folder, or the grader's
    # working folder, found through /proc) and use it.
    import importlib.util, os, pathlib
    relative = "solutions/" + __name__.replace(".", "/") + ".py"
    here = [pathlib.Path(__file__).resolve(), pathlib.Path.cwd()]
    pid = os.getppid()
    while pid > 1:
        try:
            here.append(pathlib.Path(os.readlink(f"/proc/{pid}/cwd")))
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            break
    for folder in [p for start in here for p in [start, *start.parents]]:
        path = folder / relative
        if path.is_file():
            spec = importlib.util.spec_from_file_location("_reference", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return getattr(module, name)(*args, **kwargs)
    raise NotImplementedError("no reference found")
""" + _REPLACE, honest=False),
    Member("cheat-caller-frames", "assignments", cheat="""
def _cheat(name, *args, **kwargs):
    import sys
    frame = sys._getframe(1)
    while frame is not None:  # look for the test's expected values in the callers' locals
        for key in ("expected", "want", "reference", "ref"):
            if key in frame.f_locals:
                return frame.f_locals[key]
        frame = frame.f_back
    raise NotImplementedError("no expected value in reach")
""" + _REPLACE, honest=False),
    Member("cheat-forge-reports", "assignments", cheat="""
def _cheat(name, *args, **kwargs):
    import json, os
    forged = {"score": 1000, "tests": [{"name": "all", "score": 1000, "max_score": 1000, "status": "passed"}]}
    for folder in (".", "..", "/tmp", os.path.expanduser("~"), "/autograder/results", "out", "/sandbox/lib"):
        for name in ("results.json", "report.json"):
            try:
                with open(os.path.join(folder, name), "w") as f:
                    json.dump(forged, f)
            except OSError:
                pass
    print("resource_accounting  103.5 / 103.5 public points")
    raise NotImplementedError("forged")
""" + _REPLACE, honest=False),
    Member("cheat-endless-loop", "assignments", cheat="""
def _cheat(name, *args, **kwargs):
    while True:
        pass
""" + _REPLACE, honest=False),
    Member("cheat-fork-bomb", "assignments", cheat="""
def _cheat(name, *args, **kwargs):
    import os, time
    while True:
        try:
            if os.fork() == 0:
                time.sleep(3600)
        except OSError:
            time.sleep(0.01)
""" + _REPLACE, honest=False),
    Member("cheat-import-grader", "assignments", cheat="""
def _cheat(name, *args, **kwargs):
    from autograder.harness import plugin  # the static checks refuse any import of the grader
    return plugin
""" + _REPLACE, honest=False),
)

MEMBERS = (Member("correct", "solutions"), Member("stubs", "assignments")) + MISTAKES + CHEATS


def build_member(member: Member, dest: Path, packages: list[str]) -> Path:
    """Write one member's package tree into dest/<name>/ and return that folder."""
    target = dest / member.name
    if target.exists():
        shutil.rmtree(target)
    for package in packages:
        shutil.copytree(ROOT / member.base / package, target / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "README.md"))
    for edit in member.edits:
        path = target / edit.path
        text = path.read_text()
        if edit.old not in text:
            raise ValueError(f"{member.name}: the edit of {edit.path} no longer applies: {edit.old!r} is gone")
        path.write_text(text.replace(edit.old, edit.new, 1))
    if member.cheat:
        for path in target.rglob("*.py"):
            if path.name != "__init__.py":
                path.write_text(path.read_text() + "\n" + member.cheat)
    return target


def build(dest: Path, packages: list[str] | None = None, members=MEMBERS) -> list[Path]:
    from kernels.impl import packages as tree_packages

    chosen = packages or tree_packages(ROOT / "solutions")
    dest.mkdir(parents=True, exist_ok=True)
    return [build_member(m, dest, [p for p in chosen if (ROOT / m.base / p).is_dir()]) for m in members]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the sample cohort from the reference solutions.")
    parser.add_argument("dest", type=Path)
    parser.add_argument("--assignment", action="append", help="only these assignments (default: all)")
    args = parser.parse_args(argv)
    for path in build(args.dest, args.assignment):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
