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
The check has budgets of its own: source size, alias sets, and a deadline for the whole scan; a
submission over one gets a message saying which, and no points for what it affects.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import threading
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

EVERY_MODULE = "*"
IMPORTERS = ("importlib.import_module", "__import__")
NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")  # the line ends Python's tokenizer knows
MAX_EXPRESSION = 100
ALIAS_ROUNDS = 5  # `G = F` after `F = torch.nn.functional`: enough for any real chain of aliases
MAX_ALIASES = 64  # what one name may stand for; real code binds a name to a handful of things
# Bytes of one .py file the check reads, and of all together: the largest reference module has about
# 23 KB; parsing takes some hundreds of bytes of memory per byte of dense source.
MAX_FILE_SOURCE = 256 << 10
MAX_SOURCE = 2 << 20
MAX_NAMES = 500_000  # names all references together may resolve to (both reference solutions: about 2600)
SCAN_SECONDS = 60.0  # the whole scan of one submission
# Parsing runs in a thread of its own with a deep stack, at a recursion limit at least as high as the
# worker could compile at (Python's parser refuses deeper nesting by itself), so that nothing the
# worker can import is unreadable here.
PARSE_STACK = 512 << 20
PARSE_RECURSION = 100_000
NOT_SOURCE = (".so", ".pyd", ".dll", ".dylib", ".pyc", ".pyo", ".pth", ".egg", ".whl", ".zip")


@dataclass(frozen=True)
class Rule:
    """What some modules of an assignment package may not use (`forbidden`) and must use (`required`).

    `modules` are module names inside the package ("flops"), task names for one function or class
    ("einops_ops.attention_scores": only that task fails), or "*" for every module. With
    `imports_only`, only imports count, matched from the top (the grader's package names, such as
    `tests`, are common words elsewhere, and a submission may have a tests module of its own).
    """

    name: str
    modules: tuple[str, ...]
    forbidden: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    reason: str = ""
    imports_only: bool = False


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


@dataclass(frozen=True)
class Reference:
    """A place where a file names something: what it may resolve to (best guess first, the chain as
    written last), and `owner`, the top-level function or class it is in (None: module-level code)."""

    line: int
    expression: str
    names: tuple[str, ...]
    kind: str  # "import", "star" (from x import *), "use", "call" (a use as a call's callee) or "string"
    owner: str | None


@dataclass
class Module:
    name: str  # dotted: "resource_accounting.flops"
    file: str  # relative to the package folder: "flops.py"
    references: list[Reference]
    defs: set[str]  # its top-level functions and classes
    stubs: set[str] = field(default_factory=set)  # those whose body only raises NotImplementedError
    problem: str = ""
    problem_line: int = 0


def scan(package_root: Path, package: str, rules: list[Rule]) -> list[Violation]:
    """Check every .py file below `package_root` (the folder of package `package`) against `rules`."""
    return scan_packages({package: Path(package_root)}, {package: rules})


def scan_packages(folders: dict[str, Path], rules: dict[str, list[Rule]],
                  seconds: float = SCAN_SECONDS) -> list[Violation]:
    """Check the packages `folders` ({package: its folder}) together: the rules of each package in
    `rules` follow imports into the others, and the grader rule applies to all of them."""
    budget = _Budget(time.monotonic() + seconds)
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


class _OverBudget(Exception):
    """The scan of one submission ran out of time, source or names to follow."""


class _Budget:
    """What one scan may still spend: time until `deadline`, bytes of source, resolved names."""

    def __init__(self, deadline: float) -> None:
        self.deadline, self.source, self.names = deadline, 0, 0

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise _OverBudget(f"the scan ran past its deadline ({SCAN_SECONDS:g} s at most)")

    def read(self, size: int) -> None:
        self.source += size
        if self.source > MAX_SOURCE:
            raise _OverBudget(f"the packages hold more than {MAX_SOURCE >> 20} MB of Python source")

    def resolve(self, count: int) -> None:
        self.names += count
        if self.names > MAX_NAMES:
            raise _OverBudget(f"its names resolve to more than {MAX_NAMES} candidates, more than the check follows")


def blocked(violations: list[Violation], task: str) -> list[Violation]:
    """The violations that fail a test marked task(`task`): "flops.FlopCounter" is module flops's."""
    module = task.partition(".")[0]
    return [v for v in violations if EVERY_MODULE in v.blocks or (task and {task, module} & set(v.blocks))]


# --- Reading a file ---------------------------------------------------------------------------------

def _parse(path: Path, package_root: Path, package: str, budget: _Budget) -> Module:
    rel = path.relative_to(package_root)
    name = ".".join([package, *rel.parent.parts] + ([] if rel.stem == "__init__" else [rel.stem]))
    file = rel.as_posix()
    budget.check()
    if path.stat().st_size > MAX_FILE_SOURCE:
        return Module(name, file, [], set(), problem=f"{file}: larger than {MAX_FILE_SOURCE >> 10} KB of source, "
                      "more than the static check reads: a hand-written module is far smaller; split or shorten it")
    data = path.read_bytes()
    budget.read(len(data))
    if _encoding(data) not in ("utf-8", "utf-8-sig"):
        return Module(name, file, [], set(), problem=f"{file}: not UTF-8 source (its coding line names another "
                      "codec), which the check cannot read as Python does: save it as UTF-8 without a coding line")
    try:
        tree = _parse_deep(data, file)
    except SyntaxError as exc:
        return Module(name, file, [], set(), problem=f"{file} line {exc.lineno}: does not parse ({exc.msg}); it will "
                      f"fail to import: fix it (`python -m py_compile {file}` shows the error)",
                      problem_line=exc.lineno or 0)
    except (ValueError, RecursionError, MemoryError) as exc:
        why = ": ".join([type(exc).__name__] + ([str(exc)[:200]] if str(exc) else []))
        return Module(name, file, [], set(), problem=f"{file}: cannot be parsed ({why}); it is nested too deeply "
                      "or is not source: fix it")
    context = name if rel.stem == "__init__" else name.rpartition(".")[0]
    try:
        return _Reader(tree, _text(data), context, budget).module(name, file)
    except _Tangled as exc:
        return Module(name, file, [], set(), problem=f"{file} line {exc.line}: `{exc.name}` may stand for more than "
                      f"{MAX_ALIASES} things through its assignments, more than the static check follows: give "
                      "each meaning a name of its own", problem_line=exc.line)


def _parse_deep(data: bytes, file: str) -> ast.Module:
    """ast.parse in a thread with a deep stack and a high recursion limit (restored after)."""
    result: list = []

    def run() -> None:
        try:
            result.append(ast.parse(data, filename=file))
        except BaseException as exc:  # noqa: BLE001  (handed to the caller)
            result.append(exc)

    limit = sys.getrecursionlimit()
    old_stack = threading.stack_size(PARSE_STACK)
    try:
        sys.setrecursionlimit(max(limit, PARSE_RECURSION))
        thread = threading.Thread(target=run, name="parse")
        thread.start()
    finally:
        threading.stack_size(old_stack)
    thread.join()
    sys.setrecursionlimit(limit)
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


class _Tangled(Exception):
    def __init__(self, name: str, line: int) -> None:
        super().__init__(name)
        self.name, self.line = name, line


def _encoding(data: bytes) -> str:
    """The encoding Python reads the file in (its coding line), or "" when that is unusable."""
    try:
        return tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError:
        return ""


def _text(data: bytes) -> str:
    """The source as text, for quoting expressions as written."""
    return data.decode("utf-8", errors="replace")


class _Reader:
    """One parsed file: its aliases, then every reference it makes. It walks the tree with ast.walk,
    not recursion, so that a deeply nested expression cannot crash the check and hide a call."""

    def __init__(self, tree: ast.Module, text: str, context: str, budget: _Budget) -> None:
        self.budget = budget
        # Byte strings: an AST column offset counts UTF-8 bytes. Split once (ast.get_source_segment
        # splits the whole file on every call).
        self.lines = [line.encode("utf-8", "replace") for line in LINE.findall(text)]
        self.context = context
        self.nodes = list(ast.walk(tree))
        budget.check()
        self.owner: dict[int, str] = {}
        for statement in tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.owner.update((id(n), statement.name) for n in ast.walk(statement))
        self.defs = set(self.owner.values())
        self.stubs = {s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and _is_stub(s)}
        self.aliases: dict[str, set[str]] = {}
        self.stars: list[str] = []

    def module(self, name: str, file: str) -> Module:
        imports = [r for node in self.nodes for r in self._imports(node)]
        self._assignments()
        prose = {id(n.value) for n in self.nodes if isinstance(n, ast.Expr)}
        inner = {id(n.value) for n in self.nodes if isinstance(n, ast.Attribute)}
        self.callees = {id(n.func) for n in self.nodes if isinstance(n, ast.Call)} | {
            id(d) for n in self.nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            for d in n.decorator_list}  # a decorator is called with what it decorates
        uses = [r for n in self.nodes if id(n) not in inner for r in self._uses(n)]
        strings = [r for n in self.nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)
                   and id(n) not in prose for r in self._string(n)]
        return Module(name, file, sorted(imports + uses + strings, key=lambda r: r.line), self.defs, self.stubs)

    def _reference(self, node: ast.AST, names, kind: str) -> Reference:
        self.budget.resolve(len(names))
        text = " ".join((self._segment(node) or names[0]).split())
        text = text if len(text) <= MAX_EXPRESSION else text[: MAX_EXPRESSION - 3] + "..."
        return Reference(node.lineno, text, tuple(names), kind, self.owner.get(id(node)))

    def _segment(self, node: ast.AST) -> str:
        """The node's source as written."""
        lines = self.lines[node.lineno - 1: node.end_lineno]
        if not lines or node.end_col_offset is None:
            return ""
        if len(lines) == 1:
            return lines[0][node.col_offset: node.end_col_offset].decode("utf-8", "replace")
        return b"".join([lines[0][node.col_offset:], *lines[1:-1], lines[-1][: node.end_col_offset]]).decode(
            "utf-8", "replace")

    def _absolute(self, module: str | None, level: int) -> str:
        """`from ..x import y` as an absolute module name, from this file's package."""
        parts = self.context.split(".")
        if not level or level - 1 >= len(parts):
            return module or ""  # absolute, or climbing above the top package (which fails to import)
        return ".".join(parts[: len(parts) - level + 1] + ([module] if module else []))

    def _imports(self, node: ast.AST) -> list[Reference]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                self._bind(bound, alias.name if alias.asname else bound, node.lineno)
            return [self._reference(node, [a.name for a in node.names], "import")]
        if not isinstance(node, ast.ImportFrom):
            return []
        base = self._absolute(node.module, node.level)
        if node.names[0].name == "*":
            self.stars.append(base)
            if len(self.stars) > MAX_ALIASES:
                raise _Tangled("*", node.lineno)
            return [self._reference(node, [base], "star")]
        targets = [f"{base}.{alias.name}" for alias in node.names]
        for alias, target in zip(node.names, targets):
            self._bind(alias.asname or alias.name, target, node.lineno)
        return [self._reference(node, targets, "import")]

    def _bind(self, name: str, target: str, line: int) -> None:
        bound = self.aliases.setdefault(name, set())
        bound.add(target)
        if len(bound) > MAX_ALIASES:
            raise _Tangled(name, line)

    def _assignments(self) -> None:
        """`F = torch.nn.functional` makes F an alias too."""
        pairs = [(t.id, n.value, n.lineno) for n in self.nodes if isinstance(n, (ast.Assign, ast.AnnAssign))
                 for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)]
        for _ in range(ALIAS_ROUNDS):
            grown = False
            self.budget.check()
            for target, value, line in pairs:
                aliased, written, starred = self._candidates(value)
                names = set(aliased or starred) or ({written} if written else set())
                if not names <= self.aliases.get(target, set()):
                    self.aliases.setdefault(target, set()).update(names)
                    grown = True
                    if len(self.aliases[target]) > MAX_ALIASES:
                        raise _Tangled(target, line)
            if not grown:
                return

    def _candidates(self, node: ast.AST | None) -> tuple[list[str], str, list[str]]:
        """What a name, attribute chain or `getattr(chain, "name")` may be: through the file's aliases,
        as written, and through its star imports (a guess, for names bound nowhere else)."""
        attrs: list[str] = []
        while isinstance(node, ast.Attribute) or _is_getattr(node):
            attrs.insert(0, node.attr if isinstance(node, ast.Attribute) else node.args[1].value)
            node = node.value if isinstance(node, ast.Attribute) else node.args[0]
        if not isinstance(node, ast.Name):
            return [], ".".join(attrs), []
        aliased = [".".join([base, *attrs]) for base in sorted(self.aliases.get(node.id, set()))]
        starred = [] if aliased else [".".join([star, node.id, *attrs]) for star in self.stars]
        return aliased, ".".join([node.id, *attrs]), starred

    def _resolve(self, node: ast.AST | None) -> list[str]:
        """The candidates: through aliases, through star imports, and last the chain as written."""
        aliased, written, starred = self._candidates(node)
        return aliased + starred + [written] if written else []

    def _uses(self, node: ast.AST) -> list[Reference]:
        if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and set(self._resolve(node.func)) & set(IMPORTERS)):
            target = node.args[0].value
            level = len(target) - len(target.lstrip("."))
            return [self._reference(node, [self._absolute(target.lstrip(".") or None, level)], "import")]
        if isinstance(node, (ast.Name, ast.Attribute)) and not isinstance(node.ctx, ast.Load):
            return []  # an assignment target is not a use
        if isinstance(node, (ast.Name, ast.Attribute)) or _is_getattr(node):
            names = self._resolve(node)
            return [self._reference(node, names, "call" if id(node) in self.callees else "use")] if names else []
        return []

    def _string(self, node: ast.Constant) -> list[Reference]:
        """A string that is a name names it; in other text only dotted names count (words are prose)."""
        value = node.value.strip()
        names = [value] if NAME.fullmatch(value) else [t for t in NAME.findall(value) if "." in t]
        return [self._reference(node, names, "string")] if names else []


def _is_stub(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A body of a docstring and `raise NotImplementedError(...)`, as the stub generator writes it."""
    body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _is_getattr(node: ast.AST | None) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str))


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
    for name in reference.names:
        for entry in rule.forbidden:
            if _matches(entry, name, not rule.imports_only):
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
