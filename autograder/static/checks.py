"""Static checks: a submission's source is parsed, never imported, for the APIs a task may not use.

    violations = scan(stage / "submission" / "resource_accounting", "resource_accounting", RULES)
    blocked(violations, "flops.FlopCounter")   # those that fail a test marked task("flops.FlopCounter")

A forbidden name is a dotted name (`torch.utils.flop_counter`: it and everything below it) or an
identifier (`FlopCounterMode`: any part of a dotted name). A file uses it through
- an import: `import x.y`, `from x import y`, `from x.y import *`, `importlib.import_module("x.y")`,
  `__import__("x.y")`;
- a name or attribute chain that resolves to it through the file's imports and plain assignments
  (`import torch.nn.functional as F` ... `F.scaled_dot_product_attention`), or `getattr(F, "name")`;
- a string constant that is a name, or a dotted name inside a string (`eval("F.softmax(s)")`);
  prose (docstrings, and single words in a sentence) is not a use.
A rule covers the code its modules (or tasks) can run: all of each module (or the task's function),
and what they import from the package, transitively: a whole module, or for `from .helpers import
fn` that module's top-level code and the functions and classes reached from `fn`. So moving a call
into a helper does not hide it (the helper's line is reported), while importing the input check of
reference.py does not drag in reference.py's softmax. A required name must be called by that code
(a call or a decorator that resolves to it: naming it, or passing it around, is not using it); a task that
is still a stub (`raise NotImplementedError`) is left to fail as not implemented.
Names built at run time (concatenated strings, computed `eval` text) are beyond a static check;
the hidden tests measure what such code would fake.

Every package of the submission is read (`scan_packages`), so an import of the other assignment's
package is followed like one within the package. Only plain source can be checked: a module file
Python would import without it being source (an extension module, bytecode, a .pth file) fails
everything, and a .py file the check cannot read (it does not parse, even at the depth the worker
could compile it; too large; names too tangled to follow) fails every task whose code can reach it.
Reading the source is autograder/static/source.py's. The check has budgets of its own: source size, alias sets, and a deadline for the whole scan; a
submission over one gets a message saying which, and no points for what it affects.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from autograder.static.source import SCAN_SECONDS, Module, Reference, _Budget, _OverBudget, _parse

EVERY_MODULE = "*"
NOT_SOURCE = (".so", ".pyd", ".dll", ".dylib", ".pyc", ".pyo", ".pth", ".egg", ".whl", ".zip")


@dataclass(frozen=True)
class Rule:
    """What some modules of an assignment package may not use (`forbidden`) and must use (`required`).

    `modules` are module names inside the package ("flops"), task names for one function or class
    ("einops_ops.attention_scores": only that task fails), or "*" for every module. With
    `imports_only`, only imports count, matched from the top (the grader's package names, such as
    `tests`, are common words elsewhere, and a submission may have a tests module of its own). With
    `stores_only`, only attributes assigned or deleted count (`torch.Tensor.x = f`), matched from the top;
    other rules never count a store. With `from_the_top`, every use counts, but an identifier matches only a
    whole name from its start (`exec`, not `torch.exec`; `gc.get_objects`, not a local `gc`).
    """

    name: str
    modules: tuple[str, ...]
    forbidden: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    reason: str = ""
    imports_only: bool = False
    stores_only: bool = False
    from_the_top: bool = False


# What changes another module, or torch, while the tests run, or reaches what the check cannot read (code or names
# built at run time): the tests observe a submission through torch and the course library, in the worker where its
# code runs. Matched from the top, as dotted names (`gc.collect()` and a local variable called `vars` are fine).
# ctypes is left to the sandbox, whose own tests plant attacks through it (tests/autograder/sandbox); a Triton
# package forbids it too (autograder/static/triton_rules.py, HIDDEN_NAMES).
PATCHERS = ("sys.modules", "sys._getframe", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
            "inspect.currentframe", "inspect.stack", "inspect.getouterframes", "inspect.getinnerframes",
            "inspect.trace",
            "importlib", "builtins", "pkgutil", "runpy", "operator.attrgetter", "setattr", "delattr",
            "__import__", "exec", "eval", "compile", "object.__setattr__", "object.__delattr__", "type.__setattr__",
            "type.__delattr__")
# Attributes that reach a function's globals or code, or set an attribute around the assignments the check reads,
# on whatever object: matched anywhere in a name.
PATCHING_ATTRIBUTES = ("__globals__", "__code__", "__builtins__", "__closure__", "__dict__", "__setattr__",
                       "__delattr__")
# The modules whose attributes no submission may assign or delete (`torch.Tensor.untyped_storage = f`), through
# the file's imports and aliases.
SHARED_MODULES = ("torch", "triton", "kernels", "einops", "numpy", "math", "time", "os", "sys", "builtins",
                  "functools", "operator", "types", "random", "statistics", "collections", "contextlib", "warnings",
                  "weakref", "copy", "itertools", "dataclasses", "typing", "pytest", "hypothesis", "autograder",
                  "tests", "gc", "importlib", "inspect", "threading")
PATCHING_RULES = [
    Rule(name="no patching", modules=(EVERY_MODULE,), forbidden=PATCHERS, from_the_top=True,
         reason="no module may change another while the tests run, or run code built at run time (the tests "
                "observe your code through torch and the course library, in the same process)"),
    Rule(name="no patching", modules=(EVERY_MODULE,), forbidden=PATCHING_ATTRIBUTES,
         reason="no module may reach a function's globals or code, or set attributes around plain assignments "
                "(the tests observe your code through torch and the course library, in the same process)"),
    Rule(name="no patching", modules=(EVERY_MODULE,), forbidden=SHARED_MODULES, stores_only=True,
         reason="no module may assign or delete an attribute of torch, the course library or any module it did "
                "not write (the tests observe your code through them, in the same process)"),
]

# What takes work out of sight of a test's memory or FLOP measurement, a TorchDispatchMode, which sees only the
# ops of its own thread while it is the current mode: other threads or processes, and leaving the dispatch modes.
OUT_OF_SIGHT = ("threading", "_thread", "concurrent", "multiprocessing", "_disable_current_modes",
                "_DisableTorchDispatch", "_pop_mode", "_pop_torch_dispatch_stack", "_unset_dispatch_mode")

GRADER_RULE = Rule(
    name="grader code",
    modules=(EVERY_MODULE,),
    forbidden=("autograder", "solutions", "tests"),
    reason="a submission may not import the grader, the reference solutions or the tests",
    imports_only=True,
)


@dataclass(frozen=True)
class Violation:
    """One finding. `blocks`: the modules or tasks (as its rule names them) whose tests it fails, "*"
    for all. A file the check cannot read (rule "syntax") blocks the modules whose code can reach it."""

    rule: str
    file: str
    line: int
    expression: str
    blocks: tuple[str, ...]
    message: str


def scan(package_root: Path, package: str, rules: list[Rule]) -> list[Violation]:
    """Check every .py file below `package_root` (the folder of package `package`) against `rules`."""
    return scan_packages({package: Path(package_root)}, {package: rules})


def scan_packages(folders: dict[str, Path], rules: dict[str, list[Rule]],
                  seconds: float = SCAN_SECONDS) -> list[Violation]:
    """Check the packages `folders` ({package: its folder}) together: the rules of each package in
    `rules` follow imports into the others, and the grader rule applies to all of them."""
    budget = _Budget(time.process_time() + seconds)  # CPU seconds: the same on a loaded machine
    try:
        return _scan(folders, rules, budget)
    except _OverBudget as exc:
        return [Violation("budget", "", 0, "", (EVERY_MODULE,), f"the scan stopped: {exc}; nothing of this "
                          "submission is graded: submit the package folders with hand-written source only")]


def _scan(folders: dict[str, Path], rules: dict[str, list[Rule]], budget: "_Budget") -> list[Violation]:
    modules: dict[str, Module] = {}
    found: list[Violation] = []
    for package, root in sorted(folders.items()):
        root = Path(root)
        if not root.is_dir():
            continue
        files = sorted(p for p in root.rglob("*") if p.is_file())
        found += [_not_source(package, p.relative_to(root).as_posix()) for p in files if _is_not_source(p)]
        for path in (p for p in files if p.suffix == ".py"):
            module = _parse(path, root, package, budget)
            modules[module.name] = module
    affected = _affected([m for m in modules.values() if m.problem], modules, folders, budget)
    for module in (m for m in modules.values() if m.problem):
        found.append(Violation("syntax", module.file, module.problem_line, "", affected[module.name], module.problem))
    found += _forbidden(GRADER_RULE, modules, "", budget)
    for package, package_rules in sorted(rules.items()):
        for rule in package_rules:
            found += _forbidden(rule, modules, package, budget) + _missing(rule, modules, package, budget)
    return found


def _is_not_source(path: Path) -> bool:
    return path.name.endswith(NOT_SOURCE) or ".so." in path.name


def _not_source(package: str, rel: str) -> Violation:
    return Violation("not source", rel, 0, "", (EVERY_MODULE,), f"{package}/{rel}: not plain source (an extension "
                     "module, bytecode or a .pth file), which Python may import instead of the source the static "
                     "check reads: remove it and submit .py files only")


def _affected(problems: list[Module], modules: dict[str, Module], folders: dict[str, Path],
              budget: _Budget) -> dict[str, tuple[str, ...]]:
    """{module that cannot be read: the modules (as tasks name them: "flops") whose code can reach it}."""
    if not problems:
        return {}
    entries = [n for n in modules if n.partition(".")[0] in folders and n.count(".") == 1]
    reaches = {n: _reach([(n, modules[n].defs | {None})], modules, budget) for n in entries}
    return {m.name: tuple(sorted(n.partition(".")[2] for n, reach in reaches.items() if m.name in reach))
            for m in problems}


def blocked(violations: list[Violation], task: str) -> list[Violation]:
    """The violations that fail a test marked task(`task`): "flops.FlopCounter" is module flops's."""
    module = task.partition(".")[0]
    return [v for v in violations if EVERY_MODULE in v.blocks or (task and {task, module} & set(v.blocks))]


# --- What a module can run --------------------------------------------------------------------------

def _imported(target: str, modules: dict[str, Module]) -> list[tuple[str, set[str | None]]]:
    """The package's code that importing `target` runs: (module, parts), with its packages' __init__."""
    parts = target.split(".")
    known = [".".join(parts[:n]) for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in modules]
    if not known:
        return []
    found: list[tuple[str, set[str | None]]] = [(name, {None}) for name in known[:-1]]
    module = modules[known[-1]]
    rest = parts[len(known[-1].split(".")):]
    if len(rest) == 1 and rest[0] in module.defs:
        return found + [(module.name, {None, rest[0]})]  # from .helpers import fn
    return found + [(module.name, module.defs | {None})]


def _start(entry: str, modules: dict[str, Module], package: str) -> tuple[str, set[str | None]] | None:
    """Where a rule's module or task starts: (module, its parts), or None when the submission lacks it
    (then its tests fail with a message of their own)."""
    short, _, task = entry.partition(".")
    module = modules.get(f"{package}.{short}")
    if module is None or (task and task not in module.defs):
        return None
    return module.name, ({None, task} if task else module.defs | {None})


def _reach(starts: list[tuple[str, set[str | None]]], modules: dict[str, Module],
           budget: _Budget | None = None) -> dict[str, set[str | None]]:
    """{module: the parts of it that `starts` can run}; None is module-level code."""
    reach: dict[str, set[str | None]] = {}
    pending = list(starts) + [(name, {None}) for start in starts for name, _ in _imported(start[0], modules)
                              if name != start[0]]
    while pending:
        if budget is not None:
            budget.check()
        name, parts = pending.pop()
        module = modules[name]
        new = parts - reach.get(name, set())
        if not new:
            continue
        reach.setdefault(name, set()).update(new)
        for reference in (r for r in module.references if r.owner in new):
            if reference.kind in ("import", "star"):
                pending += [item for target in reference.names for item in _imported(target, modules)]
            elif reference.kind in ("use", "call") and reference.names[-1].partition(".")[0] in module.defs:
                pending.append((name, {reference.names[-1].partition(".")[0]}))  # a call within the file
    return reach


def _coverage(rule: Rule, modules: dict[str, Module], package: str,
              budget: _Budget) -> dict[str, dict[str | None, set[str]]]:
    """{module: {part: the rule's entries (modules or tasks) that can run that part}}. The grader rule
    (package "") covers every module read; another rule for "*" covers its package and what that reaches."""
    if not package:
        return {name: {part: {EVERY_MODULE} for part in m.defs | {None}} for name, m in modules.items()}
    coverage: dict[str, dict[str | None, set[str]]] = {}
    for entry in rule.modules:
        if entry == EVERY_MODULE:
            starts = [(name, m.defs | {None}) for name, m in modules.items() if name.partition(".")[0] == package]
        else:
            start = _start(entry, modules, package)
            starts = [start] if start else []
        for name, parts in _reach(starts, modules, budget).items() if starts else ():
            for part in parts:
                coverage.setdefault(name, {}).setdefault(part, set()).add(entry)
    return coverage


# --- Applying a rule --------------------------------------------------------------------------------

def _matches(entry: str, name: str, anywhere: bool) -> bool:
    """A dotted `entry` matches itself and below; an identifier, with `anywhere`, any part of a name."""
    if name == entry or name.startswith(entry + "."):
        return True
    return anywhere and "." not in entry and entry in name.split(".")


def _used(rule: Rule, reference: Reference) -> str:
    """The forbidden name this reference uses under `rule` (as resolved), or ""."""
    if rule.imports_only and reference.kind not in ("import", "star"):
        return ""
    if rule.stores_only != (reference.kind == "store"):
        return ""
    for name in reference.names:
        for entry in rule.forbidden:
            if _matches(entry, name, not (rule.imports_only or rule.stores_only or rule.from_the_top)):
                return name
            if reference.kind == "star" and entry.rpartition(".")[0] == name:
                return entry  # from x.y import * brings in x.y.entry
    return ""


def _forbidden(rule: Rule, modules: dict[str, Module], package: str, budget: _Budget) -> list[Violation]:
    found, lines = [], set()
    for name, parts in sorted(_coverage(rule, modules, package, budget).items()) if rule.forbidden else ():
        module = modules[name]
        for reference in (r for r in module.references if r.owner in parts):
            used = _used(rule, reference)
            if used and (module.name, reference.line) not in lines:
                lines.add((module.name, reference.line))
                blocks = tuple(sorted(parts[reference.owner]))
                found.append(Violation(rule.name, _file(module, package), reference.line, reference.expression, blocks,
                                       _message(rule, module, reference, used, blocks, package)))
    return found


def _message(rule: Rule, module: Module, reference: Reference, used: str, blocks: tuple[str, ...],
             package: str) -> str:
    written = f"`{reference.expression}`"
    if used not in reference.expression:
        written += f" ({'imports' if reference.kind in ('import', 'star') else 'names'} `{used}`)"
    where = "any module" if EVERY_MODULE in blocks else " and ".join(_place(b) for b in blocks)
    file = _file(module, package)
    if EVERY_MODULE not in blocks and module.name not in {f"{package}.{b.partition('.')[0]}" for b in blocks}:
        where += f", which uses {file}"
    return f"{file} line {reference.line}: {written} is forbidden in {where} ({rule.reason})"


def _file(module: Module, package: str) -> str:
    """The module's file as a rule of `package` names it: relative to that package, else with its own."""
    own = module.name.partition(".")[0]
    return module.file if own == package or not package else f"{own}/{module.file}"


def _place(entry: str) -> str:
    """"flops" -> "flops.py"; a task "einops_ops.split_heads" stays as it is."""
    return entry if "." in entry else f"{entry}.py"


def _missing(rule: Rule, modules: dict[str, Module], package: str, budget: _Budget) -> list[Violation]:
    """A required name that a covered module, with the code it imports, never calls."""
    found = []
    for entry in rule.modules if rule.required else ():
        start = _start(entry, modules, package)
        if start is None or not start[1] - {None} - modules[start[0]].stubs:
            continue  # missing, or not written yet: its tests say so
        reach = _reach([start], modules, budget)
        if any(modules[name].problem for name in reach):
            continue  # it does not parse: that problem is reported instead
        uses = [n for name, parts in reach.items() for r in modules[name].references
                if r.kind == "call" and r.owner in parts for n in r.names]
        file = modules[start[0]].file
        for name in (e for e in rule.required if not any(_matches(e, n, True) for n in uses)):
            found.append(Violation(rule.name, file, 0, "", (entry,), f"{file}: `{name}` is required in "
                                   f"{_place(entry)} but never called ({rule.reason})"))
    return found
