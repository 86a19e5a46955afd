"""Reading a submission's source for the static checks (autograder/static/checks.py): each .py file parsed,
never imported, into a `Module`: its imports, its definitions and every name it refers to, resolved
through its imports and plain assignments (`Reference`). Reading has budgets of its own (`_Budget`:
time, bytes of source, names resolved) so that no file can make the scan slow or large; a file over
a budget, or too tangled to follow, is a module with a `problem` that the checks report.
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
SCAN_SECONDS = 60.0  # CPU seconds for the whole scan of one submission (the same on a loaded machine)
# Parsing runs in a thread of its own with a deep stack, at a recursion limit at least as high as the
# worker could compile at (Python's parser refuses deeper nesting by itself), so that nothing the
# worker can import is unreadable here.
PARSE_STACK = 512 << 20
PARSE_RECURSION = 100_000


@dataclass(frozen=True)
class Reference:
    """A place where a file names something: what it may resolve to (best guess first, the chain as
    written last), and `owner`, the top-level function or class it is in (None: module-level code)."""

    line: int
    expression: str
    names: tuple[str, ...]
    kind: str  # "import", "star" (from x import *), "use", "call" (a use as a call's callee), "string" or "store"
    # (an attribute assigned or deleted: `torch.Tensor.x = f`)
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


class _OverBudget(Exception):
    """The scan of one submission ran out of time, source or names to follow."""


class _Budget:
    """What one scan may still spend: time until `deadline`, bytes of source, resolved names."""

    def __init__(self, deadline: float) -> None:
        self.deadline, self.source, self.names = deadline, 0, 0

    def check(self) -> None:
        if time.process_time() > self.deadline:
            raise _OverBudget(f"the scan used more than its {SCAN_SECONDS:g} s of CPU time")

    def read(self, size: int) -> None:
        self.source += size
        if self.source > MAX_SOURCE:
            raise _OverBudget(f"the packages hold more than {MAX_SOURCE >> 20} MB of Python source")

    def resolve(self, count: int) -> None:
        self.names += count
        if self.names > MAX_NAMES:
            raise _OverBudget(f"its names resolve to more than {MAX_NAMES} candidates, more than the check follows")


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
        self.imported: set[str] = set()  # names an import binds, and names assigned from their attributes

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
        self.imported.add(name)
        bound = self.aliases.setdefault(name, set())
        bound.add(target)
        if len(bound) > MAX_ALIASES:
            raise _Tangled(name, line)

    def _assignments(self) -> None:
        """`F = torch.nn.functional` makes F an alias too."""
        pairs = [(t.id, n.value, n.lineno) for n in self.nodes if isinstance(n, (ast.Assign, ast.AnnAssign))
                 for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)]
        # A name assigned from an imported name's chain is imported too (T = torch.Tensor).
        for _ in range(ALIAS_ROUNDS):
            rooted = {target for target, value, _ in pairs if _root(value) in self.imported} - self.imported
            if not rooted:
                break
            self.imported |= rooted
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
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            # An attribute assigned or deleted: a store, not a use; of what the file imported (through its
            # aliases), never of a local variable that merely shares a module's name (`copy.requires_grad = True`)
            # nor one a star import might stand for (a guess, which would make every local's attribute a store).
            aliased, _, _ = self._candidates(node)
            return [self._reference(node, aliased, "store")] if aliased and _root(node) in self.imported else []
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
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


def _root(node: ast.AST | None) -> str | None:
    """The name an attribute chain (or `getattr(chain, "name")`) starts from, or None."""
    while isinstance(node, ast.Attribute) or _is_getattr(node):
        node = node.value if isinstance(node, ast.Attribute) else node.args[0]
    return node.id if isinstance(node, ast.Name) else None


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
