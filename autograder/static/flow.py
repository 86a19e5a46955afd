"""The data-flow analysis under the Triton rules (autograder/static/triton_rules.py): which names of a
package's host code may hold a tensor.

The package is parsed, never imported: its modules, their imports and their definitions (`_Module`), and
a unit per function, lambda or class body (`_Unit`). From each task module the analysis reaches the
package code it uses; it then evaluates every unit until nothing changes: a parameter is a tensor when
the rule names it or a call passes one, a name is one when anything assigned to it may be, an allocation,
a view or a cast of one is one, and a shape, a stride, a dtype or a length is a number. Flow-insensitive
and conservative.

Flows it cannot follow are made conservative or refused (`_store` and the subclass's checks): a name
bound by an `except ... as`, a `match` capture or a user decorator's function is a tensor; a default
argument is what it defaults to; a generator returns what it yields; a class body's names and every
attribute stored are followed by attribute name (`x.stash` is a tensor wherever one was stored in a
`.stash`), and a user method's (or property's) result by method name; a package module's global read
through an import is that global. Putting a tensor into a container is followed only where the
container was made in the same function (`box = []; box.append(t)` makes `box` a tensor); into
anything else (a module global, an argument, an enclosing function's name) it is refused, and so are
`global` and `nonlocal`.

`FlowAnalysis` leaves the checks to its subclass: `_check(node, unit)` for host code and
`_check_kernel(node, unit)` for @triton.jit code, called on the last evaluation (`self.reporting`), and
`_refuse(node, unit, why)` for a flow that cannot be followed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from autograder.static.checks import Violation

# Attributes of a tensor (or of anything) whose value is a number, a dtype or a device, never tensor data.
METADATA = ("shape", "dtype", "device", "is_cuda", "is_cpu", "ndim", "requires_grad", "is_leaf", "layout",
            "itemsize", "element_size", "size", "stride", "dim", "numel", "nelement", "is_contiguous",
            "data_ptr", "storage_offset", "get_device", "is_floating_point", "needs_input_grad", "index",
            "element_ty", "primitive_bitwidth", "__name__", "__qualname__", "__doc__")
# Views, casts, copies and fills: they move or convert values, never combine them. Their result is a
# tensor when their object is one. Also what an autograd Function's ctx offers.
VIEWS = ("reshape", "view", "view_as", "contiguous", "flatten", "unflatten", "unsqueeze", "squeeze", "transpose",
         "permute", "movedim", "expand", "expand_as", "T", "mT", "narrow", "select", "unbind", "split", "chunk",
         "as_strided", "tile", "to", "type", "float", "half", "bfloat16", "double", "cpu", "cuda", "detach",
         "requires_grad_", "clone", "copy_", "zero_", "fill_", "new_empty", "new_zeros", "new_full", "new_ones",
         "save_for_backward", "saved_tensors", "mark_non_differentiable", "mark_dirty", "set_materialize_grads",
         "apply")
# Builtins whose result is a number whatever they are given.
NUMBER_RESULTS = ("isinstance", "issubclass", "type", "len", "hasattr", "callable")
# Allocations: their result is a new tensor.
TENSOR_MAKERS = ("torch.empty", "torch.empty_like", "torch.zeros", "torch.zeros_like", "torch.ones",
                 "torch.ones_like", "torch.full", "torch.full_like", "torch.empty_strided")
# Methods that put their arguments into the object they are called on (lists and dicts).
MUTATORS = ("append", "extend", "insert", "update", "setdefault", "add", "appendleft", "extendleft")
# Builtins whose result is a new container.
CONTAINERS = ("list", "dict", "set")
# Decorators whose function is still the one defined (the dotted ones when the rule's host code may use them).
PLAIN_DECORATORS = ("staticmethod", "classmethod", "property")
# Special methods a class of host code may define (the others run on operators, loops, `with` ...).
DUNDER_METHODS = ("__init__", "__post_init__")


class _Unknown(ast.expr):
    """The value of a binding the analysis cannot see (an exception caught, a `match` capture): a tensor."""


_UNKNOWN = _Unknown()

# --- The package: modules, their imports and their definitions --------------------------------------

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _top_level(statements: list[ast.stmt]):
    """The module-level nodes: into if/try/with/for blocks, not into functions, classes or lambdas."""
    stack = list(statements)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack += list(ast.iter_child_nodes(node))


class _Module:
    def __init__(self, name: str, file: str, tree: ast.Module, is_package: bool) -> None:
        self.name, self.file, self.tree = name, file, tree
        self.context = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                child._parent = node  # type: ignore[attr-defined]
        self.aliases: dict[str, str] = {}  # bound name -> the dotted module or name it imports
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.aliases[alias.asname or alias.name.partition(".")[0]] = (
                        alias.name if alias.asname else alias.name.partition(".")[0])
            elif isinstance(node, ast.ImportFrom):
                base = self.absolute(node.module, node.level)
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
        top = list(_top_level(tree.body))
        self.defs = {n.name: n for n in top if isinstance(n, _DEFS)}
        self.globals = ({n.id for n in top if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                        | {n.name for n in top if isinstance(n, ast.ExceptHandler) and n.name})
        self.env: dict[str, bool] = {}

    def absolute(self, module: str | None, level: int) -> str:
        parts = self.context.split(".")
        if not level or level - 1 >= len(parts):
            return module or ""
        return ".".join(parts[: len(parts) - level + 1] + ([module] if module else []))


@dataclass(eq=False)
class _Unit:
    """One body of code: a module's top level, a class body, a function, a lambda, or the decorators
    and defaults of a function (which run where it is defined)."""

    module: _Module
    node: ast.AST
    statements: list
    kernel: bool
    parent: _Unit | None = None
    qualname: str = ""
    params: dict[str, bool] = field(default_factory=dict)  # name -> may hold a tensor
    escapes: bool = False
    env: dict[str, bool] = field(default_factory=dict)
    returns: bool = False
    locals: dict[str, _Unit] = field(default_factory=dict)  # nested functions and lambdas bound to a name
    header: _Unit | None = None  # a function's decorators and defaults
    stored: set = field(default_factory=set)  # its containers a tensor was put into (`box.append(t)`)
    decorated: bool = False  # by a decorator of the package's own: its callers and result are unknown

    @property
    def scope(self) -> bool:
        """Does it hold local names (a function or lambda, not a module, class body or header)?"""
        functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
        return isinstance(self.node, functions) and not self.qualname.endswith("<header>")


def _dotted(node: ast.AST) -> tuple[str, list[str]] | None:
    """`a.b.c` -> ("a", ["b", "c"]); None for anything but a name and attributes."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.insert(0, node.attr)
        node = node.value
    return (node.id, attrs) if isinstance(node, ast.Name) else None


def _matches(name: str, allowed: tuple[str, ...]) -> bool:
    return any(name == a or (a.endswith(".*") and (name == a[:-2] or name.startswith(a[:-1]))) for a in allowed)


def _is_jit(function: ast.AST, module: _Module) -> bool:
    for decorator in getattr(function, "decorator_list", []):
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        chain = _dotted(target)
        if chain and ".".join([module.aliases.get(chain[0], chain[0]), *chain[1]]) == "triton.jit":
            return True
    return False


def _constexprs(function: ast.FunctionDef) -> set[str]:
    args = function.args.posonlyargs + function.args.args + function.args.kwonlyargs
    return {a.arg for a in args if a.annotation is not None and ast.unparse(a.annotation).endswith("constexpr")}


def _parent(node: ast.AST) -> ast.AST | None:
    return getattr(node, "_parent", None)


def _is_call_of(node: ast.AST) -> bool:
    parent = _parent(node)
    return isinstance(parent, ast.Call) and parent.func is node


def _is_grid(node: ast.AST) -> bool:
    """`node` is the grid of a launch: kernel[node](...)."""
    parent = _parent(node)
    return isinstance(parent, ast.Subscript) and parent.slice is node and _is_call_of(parent)


def _in_decorator(node: ast.AST) -> bool:
    """Inside a decorator (`@triton.heuristics({"EVEN": lambda args: ...})`: Triton calls it with numbers)."""
    child, parent = node, _parent(node)
    while parent is not None and not isinstance(parent, _DEFS):
        child, parent = parent, _parent(parent)
    return parent is not None and any(child is d for d in parent.decorator_list)


class FlowAnalysis:
    """What each unit of a package's code may hold; `rule` (a TritonRules) names the task modules, the entry
    points' tensor parameters and the allowlists; `found` collects the findings of the subclass's checks."""

    def __init__(self, rule, modules: dict[str, _Module], package: str) -> None:
        import torch  # the grader's own: which attribute names a tensor has

        self.rule, self.modules, self.package = rule, modules, package
        self.tensor_attributes = set(dir(torch.Tensor))
        self.units: list[_Unit] = []
        self.by_def: dict[tuple[str, str], _Unit] = {}  # (module, name or Class.method) -> unit
        self.attr_taint: dict[str, bool] = {}
        self.method_returns: dict[str, bool] = {}  # a user method's (or property's) name -> returns a tensor
        self.user_attributes: set[str] = set()
        self.found: dict[tuple[str, int], Violation] = {}
        self.ranks: dict[tuple[str, int], int] = {}
        self.reporting = False
        self.tasks = {f"{package}.{m}" for m in rule.modules}

    def _state(self):
        return ([sorted(u.env.items()) for u in self.units], [sorted(u.params.items()) for u in self.units],
                [(u.returns, u.escapes, sorted(u.stored)) for u in self.units], sorted(self.attr_taint.items()),
                sorted(self.method_returns.items()), sorted(self.user_attributes))

    # -- what is reached: the task modules, and the package code they use

    def _reach(self, tasks: list[_Module]) -> None:
        pending: list[tuple[_Module, str | None]] = [(m, None) for m in tasks] + [
            (m, name) for m in tasks for name in m.defs]
        done: set[tuple[str, str | None]] = set()
        while pending:
            module, name = pending.pop()
            if (module.name, name) in done:
                continue
            done.add((module.name, name))
            if name is None:
                statements = [s for s in module.tree.body if not isinstance(s, _DEFS)]
                self._add(_Unit(module, module.tree, statements, False, qualname="<module>"))
                nodes = [n for n in _top_level(module.tree.body) if not isinstance(n, _DEFS)]
            else:
                self._add_def(module, module.defs[name], None, name)
                nodes = list(ast.walk(module.defs[name]))
            pending += self._package_uses(module, nodes)

    def _package_uses(self, module: _Module, nodes: list[ast.AST]) -> list[tuple[_Module, str | None]]:
        found: list[tuple[_Module, str | None]] = []
        for node in nodes:
            if isinstance(node, ast.Name) and node.id in module.defs:
                found.append((module, node.id))
            chain = _dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if chain and chain[0] in module.aliases and not isinstance(_parent(node), ast.Attribute):
                # a module used as a value (not `mod.fn`) can reach all of it
                whole = not chain[1] and not isinstance(_parent(node), (ast.Import, ast.ImportFrom, ast.alias))
                found += self._package_target(".".join([module.aliases[chain[0]], *chain[1]]), whole)
            if isinstance(node, ast.Import):
                found += [(self.modules[a.name], None) for a in node.names if a.name in self.modules]
            elif isinstance(node, ast.ImportFrom):
                base = module.absolute(node.module, node.level)
                found += [(self.modules[base], None)] if base in self.modules else []
                found += [t for a in node.names for t in self._package_target(f"{base}.{a.name}")]
        return found

    def _package_target(self, dotted: str, whole: bool = False) -> list[tuple[_Module, str | None]]:
        """What a dotted name runs: a module's top level, and the definition it names (all, with `whole`)."""
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):
            module = self.modules.get(".".join(parts[:n]))
            if module is not None:
                rest = parts[n:]
                if rest and rest[0] in module.defs:
                    return [(module, None), (module, rest[0])]
                return [(module, None)] + ([(module, d) for d in module.defs] if whole and not rest else [])
        return []

    def _add(self, unit: _Unit) -> _Unit:
        self.units.append(unit)
        top = {id(d) for d in unit.module.defs.values()}
        for statement in unit.statements:
            stack = [statement]
            while stack:
                node = stack.pop()
                if isinstance(node, _SCOPES) and id(node) not in top:
                    name = getattr(node, "name", "<lambda>")
                    child = self._add_def(unit.module, node, unit, name)
                    node._unit = child  # type: ignore[attr-defined]
                    if not isinstance(node, ast.Lambda):
                        unit.locals[name] = child
                    elif isinstance(_parent(node), ast.Assign):
                        unit.locals.update((t.id, child) for t in _parent(node).targets if isinstance(t, ast.Name))
                    continue
                if not isinstance(node, _SCOPES):
                    stack += list(ast.iter_child_nodes(node))
        return unit

    def _add_def(self, module: _Module, node: ast.AST, parent: _Unit | None, name: str) -> _Unit:
        qualname = f"{parent.qualname}.{name}" if parent is not None and isinstance(parent.node, ast.ClassDef) \
            else name
        decorators = list(getattr(node, "decorator_list", []))
        if isinstance(node, ast.ClassDef):
            header = decorators + node.bases + [k.value for k in node.keywords]
            self._add(_Unit(module, node, header, False, parent, f"{qualname}.<header>"))
            body = [s for s in node.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
            unit = self._add(_Unit(module, node, body, False, parent, qualname))
            self.by_def[(module.name, qualname)] = unit
            for statement in node.body:
                if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.user_attributes.add(statement.name)
                    method = self._add_def(module, statement, unit, statement.name)
                    self._contract(method, escaping=True)
                elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                    self.user_attributes.update(t.id for t in targets if isinstance(t, ast.Name))
            return unit
        args = node.args
        named = args.posonlyargs + args.args + args.kwonlyargs
        defaults = args.defaults + [d for d in args.kw_defaults if d is not None]
        kernel = _is_jit(node, module) or bool(parent and parent.kernel)
        header = decorators + defaults
        header_unit = self._add(_Unit(module, node, header, False, parent, f"{qualname}.<header>")) if header else None
        statements = [node.body] if isinstance(node, ast.Lambda) else list(node.body)
        statements += [a.annotation for a in named if a.annotation is not None]
        unit = _Unit(module, node, statements, kernel, parent, qualname, header=header_unit)
        unit.decorated = not kernel and any(not self._plain_decorator(d, header_unit) for d in decorators)
        unit.params = {a.arg: False for a in named}
        unit.params.update({a.arg: True for a in (args.vararg, args.kwarg) if a is not None})
        if parent is None or isinstance(parent.node, ast.ClassDef):
            self.by_def[(module.name, qualname)] = unit
        if parent is None:
            self._contract(unit, escaping=False)
        return self._add(unit)

    def _plain_decorator(self, decorator: ast.expr, header: _Unit) -> bool:
        """Does the function stay the one defined (staticmethod, a host name such as functools.cache)?"""
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name) and target.id in PLAIN_DECORATORS:
            return True
        if isinstance(target, ast.Attribute) and target.attr in ("setter", "getter", "deleter"):
            return True
        dotted = self._resolve(target, header)
        return dotted is not None and not self._in_package(dotted) and _matches(dotted, self.rule.host_names)

    def _contract(self, unit: _Unit, escaping: bool) -> None:
        """An entry point's tensor parameters come from the rule (at least those: calls may add others);
        a method that is not one escapes. The contract's names hold in every module of the package."""
        tensors = self.rule.tensors.get(unit.qualname)
        if tensors is not None:
            unit.params.update({name: True for name in unit.params if name in tensors})
        elif escaping:
            unit.escapes = True

    # -- evaluating a unit: its names' taint, what it passes and returns, and (last) the rules

    def _evaluate(self, unit: _Unit) -> None:
        if unit.decorated:  # a decorator of the package's own may call it with anything, and return anything
            unit.escapes = unit.returns = True
        if unit.escapes:
            unit.params = {name: True for name in unit.params}
        self._defaults(unit)
        env = dict(unit.parent.env) if unit.parent is not None and unit.parent.scope else {}
        for name, taint in list(unit.env.items()) + list(unit.params.items()):
            env[name] = env.get(name, False) or taint
        env.update({name: True for name in unit.stored})
        unit.env = env
        bindings = self._bindings(unit.statements)
        for _ in range(20):
            changed = False
            for targets, value in bindings:
                taint = self._taint(value, unit)
                for name in targets:
                    if taint and not env.get(name, False):
                        env[name] = changed = True
                    env.setdefault(name, False)
            if not changed:
                break
        if isinstance(unit.node, ast.Module):
            unit.module.env = env
        if isinstance(unit.node, ast.ClassDef) and not unit.qualname.endswith("<header>"):
            self.attr_taint.update({name: True for name, taint in env.items() if taint})  # read as Cls.name
        if isinstance(unit.node, ast.Lambda):
            unit.returns = unit.returns or self._taint(unit.node.body, unit)
        for node in self._walk(unit.statements):
            if isinstance(node, ast.Lambda):
                bound = isinstance(_parent(node), ast.Assign) or _is_grid(node) or _in_decorator(node)
                if not bound and not unit.kernel:
                    node._unit.escapes = True  # type: ignore[attr-defined]
                continue
            if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and node.value is not None:
                unit.returns = unit.returns or self._taint(node.value, unit)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                tainted = node.value is not None and self._taint(node.value, unit)
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Attribute):
                        self.user_attributes.add(target.attr)
                        if tainted:
                            self.attr_taint[target.attr] = True
                    if tainted and not unit.kernel and isinstance(target, (ast.Attribute, ast.Subscript)):
                        self._store(target if isinstance(target, ast.Attribute) else target.value, node, unit)
            elif isinstance(node, ast.Call) and not unit.kernel:
                self._call_sites(node, unit)
                func = node.func
                if (isinstance(func, ast.Attribute) and func.attr in MUTATORS
                        and self._arguments(node, unit)):
                    self._store(func.value, node, unit)
            elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and not unit.kernel:
                self._escape(node, unit)
            if self.reporting:
                (self._check_kernel if unit.kernel else self._check)(node, unit)
        self._method_result(unit)

    def _defaults(self, unit: _Unit) -> None:
        """A parameter may hold what it defaults to (evaluated where the function is defined)."""
        node = unit.node
        if unit.header is None or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        args = node.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            if not unit.params.get(arg.arg) and self._taint(default, unit.header):
                unit.params[arg.arg] = True

    def _method_result(self, unit: _Unit) -> None:
        """A method's (or property's) result, by name: `obj.name(...)` and `obj.name` may be it."""
        if unit.parent is not None and isinstance(unit.parent.node, ast.ClassDef) and unit.returns:
            self.method_returns[unit.node.name] = True

    def _store(self, receiver: ast.expr, node: ast.AST, unit: _Unit) -> None:
        """A tensor is put into `receiver` (`receiver.append(t)`, `receiver[i] = t`, `receiver.x = t`).

        Followed where it can be: an attribute by its name (every `.x` read is then a tensor), a container
        made in this very function by the name holding it. Anything else may be reached by other names the
        analysis does not see (a module global, an argument, an enclosing function's name): refused."""
        if isinstance(receiver, ast.Attribute):
            dotted = self._resolve(receiver, unit)
            if dotted is None:
                self.attr_taint[receiver.attr] = True
                if receiver.attr not in METADATA + VIEWS:
                    return
                why = f"puts a tensor into `.{receiver.attr}`, a name tensors use for their metadata and views"
            else:
                why = f"puts a tensor into `{dotted}`, a name of a module"
        elif isinstance(receiver, ast.Name):
            why = self._store_name(receiver.id, unit)
            if why is None:
                return
        else:
            text = " ".join(ast.unparse(receiver).split())[:60]
            why = f"puts a tensor into `{text}`, an object the grader cannot follow"
        if self.reporting:
            self._refuse(node, unit, why + " (pass tensors as arguments and return them; put them only into "
                                           "containers the same function made)")

    def _store_name(self, name: str, unit: _Unit) -> str | None:
        """None (and `name` holds a tensor from now on) when `name` is a container this function made."""
        if not unit.scope and not isinstance(unit.node, ast.Module):
            return f"puts a tensor into `{name}` in a class body or a default argument"
        if name in unit.params:
            contract = self.rule.tensors.get(unit.qualname, ())
            if name in contract:
                return None  # the grader's own tensor
            return f"puts a tensor into the argument `{name}`, which the caller may hold under other names"
        values = [value for targets, value in self._bindings(unit.statements) if name in targets]
        if not values:
            kind = self._lookup(name, unit)[0]
            where = {"local": "an enclosing function's", "global": "the module-level", "alias": "the imported"}
            return f"puts a tensor into {where.get(kind, 'the')} name `{name}`, which other functions may hold"
        stale = [v for v in values if not self._fresh(v, unit)]
        if stale:
            text = " ".join(ast.unparse(stale[0]).split())[:60] if isinstance(stale[0], ast.AST) and not isinstance(
                stale[0], _Unknown) else "a value the grader cannot see"
            return f"puts a tensor into `{name}`, which holds `{text}`, an object made elsewhere"
        unit.stored.add(name)
        return None

    def _fresh(self, value: ast.expr | None, unit: _Unit) -> bool:
        """Is `value` a new container or tensor, made here (a display, list(), an allocation, a view)?"""
        if value is None or isinstance(value, ast.Constant):
            return True
        if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
            return True
        if not isinstance(value, ast.Call):
            return False
        func = value.func
        if isinstance(func, ast.Name) and func.id in CONTAINERS and self._lookup(func.id, unit)[0] == "builtin":
            return True
        if isinstance(func, ast.Attribute) and func.attr in VIEWS and func.attr not in self.user_attributes:
            return True
        return self._resolve(func, unit) in TENSOR_MAKERS

    def _refuse(self, node: ast.AST, unit: _Unit, why: str) -> None:
        """A flow the analysis cannot follow, at `node` (the subclass reports it)."""
        raise NotImplementedError

    @staticmethod
    def _walk(statements: list[ast.AST]):
        """The nodes of these statements, not inside nested functions, lambdas or classes (which are units
        of their own; lambdas and definitions themselves are yielded)."""
        stack = list(statements)
        while stack:
            node = stack.pop()
            yield node
            if isinstance(node, _SCOPES):
                continue
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.Lambda):
                    yield child
                elif not isinstance(child, _SCOPES):
                    stack.append(child)

    def _bindings(self, statements: list[ast.AST]) -> list[tuple[list[str], ast.AST | None]]:
        found: list[tuple[list[str], ast.AST | None]] = []

        def names(target: ast.AST) -> list[str]:
            """The names a target binds (`x[i] = v` and `x.a = v` bind none: see _store)."""
            return [n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]

        def pairs(target: ast.AST, value: ast.AST | None) -> None:
            if (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
                    and len(target.elts) == len(value.elts)):
                for t, v in zip(target.elts, value.elts):
                    pairs(t, v)
            else:
                found.append((names(target), value))

        for node in self._walk(statements):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    pairs(target, node.value)
            elif isinstance(node, ast.AnnAssign):
                pairs(node.target, node.value)
            elif isinstance(node, ast.AugAssign):
                found.append((names(node.target), node.value))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                target, iterable = node.target, node.iter
                if (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id ==
                        "enumerate" and isinstance(target, ast.Tuple) and len(target.elts) == 2):
                    found.append((names(target.elts[0]), None))  # the count is a number
                    target = target.elts[1]
                found.append((names(target), iterable))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                found.append((names(node.optional_vars), node.context_expr))
            elif isinstance(node, ast.NamedExpr):
                found.append((names(node.target), node.value))
            elif isinstance(node, ast.ExceptHandler) and node.name:
                found.append(([node.name], _UNKNOWN))  # what was raised: anything
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                found.append(([node.name], _UNKNOWN))  # a part of the subject: anything
            elif isinstance(node, ast.MatchMapping) and node.rest:
                found.append(([node.rest], _UNKNOWN))
        return found

    # -- what a name is

    def _lookup(self, name: str, unit: _Unit) -> tuple:
        """("local", taint) | ("alias", dotted) | ("def", unit or None) | ("global", taint) | ("builtin",)."""
        if isinstance(unit.node, ast.ClassDef) and name in unit.env and not unit.qualname.endswith("<header>"):
            return ("local", unit.env[name])
        scope = unit
        while scope is not None:
            if scope.scope and (name in scope.env or name in scope.locals):
                return ("local", scope.env.get(name, False))
            scope = scope.parent
        module = unit.module
        if name in module.aliases:
            return ("alias", module.aliases[name])
        if name in module.defs:
            return ("def", self.by_def.get((module.name, name)))
        if name in module.globals:
            return ("global", module.env.get(name, False))
        return ("builtin",)

    def _resolve(self, node: ast.AST, unit: _Unit) -> str | None:
        """The dotted name of an attribute chain rooted in an import alias."""
        chain = _dotted(node)
        if chain is None:
            return None
        kind = self._lookup(chain[0], unit)
        return self._canonical(".".join([kind[1], *chain[1]])) if kind[0] == "alias" else None

    def _canonical(self, dotted: str) -> str:
        """Through the package's modules to what they import: `flash_attention.reference.torch.matmul` is
        `torch.matmul`."""
        for _ in range(len(self.modules) + 1):
            parts = dotted.split(".")
            found = [n for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in self.modules]
            if not found:
                return dotted
            module, rest = self.modules[".".join(parts[:found[0]])], parts[found[0]:]
            if not rest or rest[0] not in module.aliases or rest[0] in module.defs:
                return dotted
            dotted = ".".join([module.aliases[rest[0]], *rest[1:]])
        return dotted

    def _in_package(self, dotted: str) -> bool:
        return dotted == self.package or dotted.startswith(self.package + ".")

    def _function(self, node: ast.AST, unit: _Unit) -> _Unit | None:
        """The package function, nested function or lambda that a name or chain refers to."""
        if isinstance(node, ast.Lambda):
            return getattr(node, "_unit", None)
        if isinstance(node, ast.Name):
            scope = unit
            while scope is not None:
                if node.id in scope.locals:
                    return scope.locals[node.id]
                scope = scope.parent
            kind = self._lookup(node.id, unit)
            if kind[0] == "def":
                return kind[1]
        dotted = self._resolve(node, unit)
        if dotted and self._in_package(dotted):
            module, _, name = dotted.rpartition(".")
            return self.by_def.get((module, name))
        return None

    # -- taint: may this expression's value hold a tensor?

    def _taint(self, node: ast.AST | None, unit: _Unit) -> bool:
        if isinstance(node, _Unknown):
            return True
        if node is None or isinstance(node, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Lambda,
                                             ast.Slice)):
            return False  # arithmetic on a tensor is a finding of its own; its result is not followed
        if isinstance(node, ast.Name):
            kind = self._lookup(node.id, unit)
            if kind[0] == "alias":
                return self._package_global(kind[1])
            return bool(kind[1]) if kind[0] in ("local", "global") else False
        if isinstance(node, ast.Attribute):
            dotted = self._resolve(node, unit)
            if dotted is not None:
                return self._package_global(dotted)
            if self.attr_taint.get(node.attr) or self.method_returns.get(node.attr):
                return True
            if node.attr in METADATA:
                return False
            if node.attr in self.user_attributes and node.attr not in VIEWS:
                return False
            return self._taint(node.value, unit)
        if isinstance(node, ast.Subscript):
            return self._taint(node.value, unit)
        if isinstance(node, ast.Call):
            return self._call_taint(node, unit)
        if isinstance(node, ast.IfExp):
            return self._taint(node.body, unit) or self._taint(node.orelse, unit)
        if isinstance(node, ast.Dict):
            return any(self._taint(v, unit) for v in node.keys + node.values if v is not None)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self._taint(node.elt, unit)
        if isinstance(node, ast.DictComp):
            return self._taint(node.key, unit) or self._taint(node.value, unit)
        return any(self._taint(child, unit) for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr))

    def _package_global(self, dotted: str) -> bool:
        """A module-level name of the package read through an import (`from .m import X`, `m.X`)."""
        if not self._in_package(dotted):
            return False
        parts = dotted.split(".")
        for n in range(len(parts) - 1, 0, -1):
            module = self.modules.get(".".join(parts[:n]))
            if module is not None:
                name = parts[n]
                return name in module.globals and name not in module.defs and module.env.get(name, False)
        return False

    def _arguments(self, node: ast.Call, unit: _Unit) -> bool:
        return any(self._taint(a, unit) for a in node.args) or any(self._taint(k.value, unit) for k in node.keywords)

    def _call_taint(self, node: ast.Call, unit: _Unit) -> bool:
        callee = self._function(node.func, unit)
        if callee is not None:
            if isinstance(callee.node, ast.ClassDef):
                return self._arguments(node, unit) or bool(callee.node.decorator_list)
            return callee.returns
        if isinstance(node.func, ast.Subscript):
            return False  # a kernel launch
        dotted = self._resolve(node.func, unit)
        if dotted is not None:
            if dotted in TENSOR_MAKERS:
                return True
            return not _matches(dotted, self.rule.number_names) and self._arguments(node, unit)
        if isinstance(node.func, ast.Name) and self._lookup(node.func.id, unit)[0] == "builtin":
            if node.func.id in NUMBER_RESULTS or node.func.id in self.rule.number_builtins:
                return False
            if (node.func.id == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                    and isinstance(node.args[1].value, str)):  # getattr(x, "name") is x.name
                attribute = ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Load())
                return self._taint(attribute, unit) or self._arguments(node, unit)
            return self._arguments(node, unit)
        if isinstance(node.func, ast.Attribute):
            if self.method_returns.get(node.func.attr):
                return True
            if node.func.attr in METADATA:
                return False
            return self._taint(node.func.value, unit) or self._arguments(node, unit)
        return self._taint(node.func, unit) or self._arguments(node, unit)

    def _call_sites(self, node: ast.Call, unit: _Unit) -> None:
        """A call passes its arguments' taint on to the callee's parameters."""
        callee, names = self._function(node.func, unit), None
        if isinstance(node.func, ast.Attribute) and node.func.attr == "apply":  # an autograd Function's
            owner = self._function(node.func.value, unit)
            if owner is not None and isinstance(owner.node, ast.ClassDef):
                callee = self.by_def.get((owner.module.name, f"{owner.qualname}.forward"))
                names = [a.arg for a in callee.node.args.args[1:]] if callee is not None else None
        if callee is None or callee.kernel or isinstance(callee.node, ast.ClassDef):
            return
        args = callee.node.args
        names = names if names is not None else [a.arg for a in args.posonlyargs + args.args]
        for position, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred):
                if self._taint(arg.value, unit):
                    callee.params.update({name: True for name in names[position:]})
                    callee.params.update({a.arg: True for a in [args.vararg] if a is not None})
                break
            if self._taint(arg, unit):
                target = names[position] if position < len(names) else getattr(args.vararg, "arg", None)
                if target is not None:
                    callee.params[target] = True
        for keyword in node.keywords:
            if self._taint(keyword.value, unit):
                targets = [keyword.arg] if keyword.arg in callee.params else list(callee.params)
                callee.params.update({name: True for name in targets})

    def _escape(self, node: ast.AST, unit: _Unit) -> None:
        """A function used as a value (not called, not a launch's grid) has callers the analysis does not
        see: every parameter of it may be a tensor."""
        if isinstance(_parent(node), ast.Attribute) or _is_call_of(node) or _is_grid(node):
            return
        target = self._function(node, unit)
        if target is not None and not target.kernel and not isinstance(target.node, ast.ClassDef):
            target.escapes = True
