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
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

EVERY_MODULE = "*"
IMPORTERS = ("importlib.import_module", "__import__")
NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")  # the line ends Python's tokenizer knows
MAX_EXPRESSION = 100
ALIAS_ROUNDS = 5  # `G = F` after `F = torch.nn.functional`: enough for any real chain of aliases


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
    for all. A file that does not parse is a problem, not a violation: it blocks nothing, as importing
    it fails its tests anyway."""

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
    package_root = Path(package_root)
    if not package_root.is_dir():
        return []
    paths = sorted(p for p in package_root.rglob("*.py") if p.is_file())
    modules = {m.name: m for m in (_parse(path, package_root, package) for path in paths)}
    found = [Violation("syntax", m.file, m.problem_line, "", (), m.problem) for m in modules.values() if m.problem]
    for rule in [GRADER_RULE, *rules]:
        found += _forbidden(rule, modules, package) + _missing(rule, modules, package)
    return found


def blocked(violations: list[Violation], task: str) -> list[Violation]:
    """The violations that fail a test marked task(`task`): "flops.FlopCounter" is module flops's."""
    module = task.partition(".")[0]
    return [v for v in violations if EVERY_MODULE in v.blocks or (task and {task, module} & set(v.blocks))]


# --- Reading a file ---------------------------------------------------------------------------------

def _parse(path: Path, package_root: Path, package: str) -> Module:
    rel = path.relative_to(package_root)
    name = ".".join([package, *rel.parent.parts] + ([] if rel.stem == "__init__" else [rel.stem]))
    file = rel.as_posix()
    data = path.read_bytes()
    try:
        tree = ast.parse(data, filename=file)
    except SyntaxError as exc:
        return Module(name, file, [], set(), problem=f"{file} line {exc.lineno}: does not parse ({exc.msg}); it will "
                      f"fail to import: fix it (`python -m py_compile {file}` shows the error)",
                      problem_line=exc.lineno or 0)
    except (ValueError, RecursionError, MemoryError) as exc:
        return Module(name, file, [], set(), problem=f"{file}: cannot be parsed ({type(exc).__name__}: {exc}); it will "
                      "fail to import: fix it")
    context = name if rel.stem == "__init__" else name.rpartition(".")[0]
    return _Reader(tree, _text(data), context).module(name, file)


def _text(data: bytes) -> str:
    """The source as text, for quoting expressions as written."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    return data.decode(encoding, errors="replace")


class _Reader:
    """One parsed file: its aliases, then every reference it makes. It walks the tree with ast.walk,
    not recursion, so that a deeply nested expression cannot crash the check and hide a call."""

    def __init__(self, tree: ast.Module, text: str, context: str) -> None:
        # Byte strings: an AST column offset counts UTF-8 bytes. Split once (ast.get_source_segment
        # splits the whole file on every call).
        self.lines = [line.encode("utf-8", "replace") for line in LINE.findall(text)]
        self.context = context
        self.nodes = list(ast.walk(tree))
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
                self.aliases.setdefault(bound, set()).add(alias.name if alias.asname else bound)
            return [self._reference(node, [a.name for a in node.names], "import")]
        if not isinstance(node, ast.ImportFrom):
            return []
        base = self._absolute(node.module, node.level)
        if node.names[0].name == "*":
            self.stars.append(base)
            return [self._reference(node, [base], "star")]
        targets = [f"{base}.{alias.name}" for alias in node.names]
        for alias, target in zip(node.names, targets):
            self.aliases.setdefault(alias.asname or alias.name, set()).add(target)
        return [self._reference(node, targets, "import")]

    def _assignments(self) -> None:
        """`F = torch.nn.functional` makes F an alias too."""
        pairs = [(t.id, n.value) for n in self.nodes if isinstance(n, (ast.Assign, ast.AnnAssign))
                 for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)]
        for _ in range(ALIAS_ROUNDS):
            grown = False
            for target, value in pairs:
                aliased, written, starred = self._candidates(value)
                names = set(aliased or starred) or ({written} if written else set())
                if not names <= self.aliases.get(target, set()):
                    self.aliases.setdefault(target, set()).update(names)
                    grown = True
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


def _reach(start: tuple[str, set[str | None]], modules: dict[str, Module]) -> dict[str, set[str | None]]:
    """{module: the parts of it that `start` can run}; None is module-level code."""
    reach: dict[str, set[str | None]] = {}
    pending = [start] + [(name, {None}) for name, _ in _imported(start[0], modules) if name != start[0]]
    while pending:
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


def _coverage(rule: Rule, modules: dict[str, Module], package: str) -> dict[str, dict[str | None, set[str]]]:
    """{module: {part: the rule's entries (modules or tasks) that can run that part}}."""
    if EVERY_MODULE in rule.modules:
        return {name: {part: {EVERY_MODULE} for part in m.defs | {None}} for name, m in modules.items()}
    coverage: dict[str, dict[str | None, set[str]]] = {}
    for entry in rule.modules:
        start = _start(entry, modules, package)
        for name, parts in _reach(start, modules).items() if start else ():
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


def _forbidden(rule: Rule, modules: dict[str, Module], package: str) -> list[Violation]:
    found, lines = [], set()
    for name, parts in sorted(_coverage(rule, modules, package).items()) if rule.forbidden else ():
        module = modules[name]
        for reference in (r for r in module.references if r.owner in parts):
            used = _used(rule, reference)
            if used and (module.file, reference.line) not in lines:
                lines.add((module.file, reference.line))
                blocks = tuple(sorted(parts[reference.owner]))
                found.append(Violation(rule.name, module.file, reference.line, reference.expression, blocks,
                                       _message(rule, module, reference, used, blocks, package)))
    return found


def _message(rule: Rule, module: Module, reference: Reference, used: str, blocks: tuple[str, ...],
             package: str) -> str:
    written = f"`{reference.expression}`"
    if used not in reference.expression:
        written += f" ({'imports' if reference.kind in ('import', 'star') else 'names'} `{used}`)"
    where = "any module" if EVERY_MODULE in blocks else " and ".join(_place(b) for b in blocks)
    if EVERY_MODULE not in blocks and module.name not in {f"{package}.{b.partition('.')[0]}" for b in blocks}:
        where += f", which uses {module.file}"
    return f"{module.file} line {reference.line}: {written} is forbidden in {where} ({rule.reason})"


def _place(entry: str) -> str:
    """"flops" -> "flops.py"; a task "einops_ops.split_heads" stays as it is."""
    return entry if "." in entry else f"{entry}.py"


def _missing(rule: Rule, modules: dict[str, Module], package: str) -> list[Violation]:
    """A required name that a covered module, with the code it imports, never calls."""
    found = []
    for entry in rule.modules if rule.required else ():
        start = _start(entry, modules, package)
        if start is None or not start[1] - {None} - modules[start[0]].stubs:
            continue  # missing, or not written yet: its tests say so
        reach = _reach(start, modules)
        if any(modules[name].problem for name in reach):
            continue  # it does not parse: that problem is reported instead
        uses = [n for name, parts in reach.items() for r in modules[name].references
                if r.kind == "call" and r.owner in parts for n in r.names]
        file = modules[start[0]].file
        for name in (e for e in rule.required if not any(_matches(e, n, True) for n in uses)):
            found.append(Violation(rule.name, file, 0, "", (entry,), f"{file}: `{name}` is required in "
                                   f"{_place(entry)} but never called ({rule.reason})"))
    return found
