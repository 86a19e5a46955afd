"""Static rules of Triton tasks: the host code allocates, reshapes and launches; the kernels compute.

    violations = scan(stage / "submission" / "flash_attention", "flash_attention", RULES)

Whatever the worker reports about how a result was computed (the kernels it launched, the torch ops
it ran) is said by code the student controls. What the grader can check itself is the source, parsed
here and never imported. A Triton task's module (and the package code it uses) splits in two:

- *kernel code*, the functions decorated with `@triton.jit`: they may use Triton's language
  (`triton.language`, `triton.cdiv`), other `@triton.jit` functions, numbers and module constants;
  not torch, not numpy, not the interpreter's insides (`x.handle`, `.data`), not host functions.
- *host code*, everything else: it may allocate tensors, reshape, view, cast and copy them, read
  their shapes and strides, check arguments, compute grids and launch kernels (`kernel[grid](...)`).
  It may not compute with tensor values: no torch function or tensor method outside an allowlist
  (matmul, `@`, einsum, exp, softmax, sum, max ... are not on it), no arithmetic, comparison or
  Python-number conversion (`float(x)`, `x.item()`) of a tensor, no `tl.constexpr` argument that is
  a tensor, no module outside an allowlist (numpy, importlib, ctypes, sys, operator ...), no dunder
  attributes (`__class__`, `__dict__` ...), and no names built at run time (`getattr` with a computed
  name, `eval`, `exec`, `__import__`, `globals()` ...).
- *every module of the package* (the worker imports them all in one process): nothing that changes
  another module at run time (assignments into a package module, sys.modules, importlib, gc,
  inspect, builtins, setattr, a string naming the task's module), nothing that runs code this check
  cannot read (exec, eval, compile, a file written and imported, pickle, marshal, code objects), and
  nothing that reaches a tensor's memory around torch (ctypes, `.numpy()`, `torch.from_numpy`, data
  pointers, the array and DLPack protocols). The grader also observes what the kernels store under the
  interpreter (kernels/stores.py): these rules keep the code that could tamper with that observation out.

What is a tensor is found by a small data-flow analysis (autograder/static/flow.py): the rule names each entry point's tensor
parameters (`flash_forward_triton`: q, k, v; `FlashAttentionTriton.forward`: ctx, q, k, v), in any
module of the package; a parameter is also a tensor when a call passes one (`Cls.apply(...)` calls
`Cls.forward`), and every parameter of a function that escapes as a value (unknown callers) or of a
method outside the contract is one; a name is one when anything assigned to it may be; an
allocation, a view or a cast of one is one; a shape, a stride, a dtype or a length is a number.
Flow-insensitive and conservative: a name that holds a tensor anywhere in a function is a tensor
everywhere in it. A flow the analysis cannot follow is either taken to carry a tensor (an exception
caught, a `match` capture, a default argument, what a generator yields, a user decorator's function, an
attribute or a method's result by name) or fails the rule with a message naming the line: `global`,
`nonlocal`, a tensor put into a container that the function did not make itself (a module global, an
argument, an enclosing function's name), special methods of a class, methods named like a tensor's
metadata. Code the analysis cannot follow at all (too deep) fails the rule with a message.

The allowlists are data (`TritonRules`), one set per task, so the next Triton assignment states its
own entry points and reuses the rest.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

from autograder.static.checks import Violation
from autograder.static.flow import (DUNDER_METHODS, METADATA, MUTATORS, TENSOR_MAKERS, VIEWS, FlowAnalysis, _constexprs,
                                    _dotted, _is_call_of, _matches, _Module, _parent, _Unit)

# Methods of Python's own strings, lists and dicts that host code uses for messages and arguments.
CONTAINER_METHODS = ("append", "extend", "insert", "pop", "items", "keys", "values", "get", "update", "setdefault",
                     "copy", "format", "join", "startswith", "endswith", "strip", "lower", "upper", "replace",
                     "bit_length")
# Builtins host code may call with anything (the result holds a tensor when an argument does) ...
BUILTINS = ("isinstance", "issubclass", "type", "len", "hasattr", "callable", "tuple", "list", "dict", "set",
            "frozenset", "zip", "enumerate", "reversed", "iter", "next", "bool", "str", "repr", "print", "super",
            "object", "staticmethod", "classmethod", "property", "slice", "getattr", "NotImplemented", "Ellipsis",
            "__name__", "__file__", "Exception", "ValueError", "TypeError", "RuntimeError", "NotImplementedError",
            "AssertionError", "KeyError", "IndexError", "AttributeError", "ImportError", "ModuleNotFoundError",
            "OverflowError", "ZeroDivisionError", "Warning", "UserWarning", "RuntimeWarning")
# ... and those that take numbers only (given a tensor they would compute with its values).
NUMBER_BUILTINS = ("range", "int", "float", "min", "max", "abs", "round", "divmod", "pow", "sum", "sorted", "any",
                   "all")
KERNEL_BUILTINS = ("range", "int", "float", "bool", "min", "max", "abs", "len", "isinstance", "print", "tuple",
                   "ValueError", "AssertionError", "NotImplementedError")
# Attributes that would leave Triton's language inside a kernel (the interpreter's numpy arrays).
KERNEL_DENIED = ("handle", "data", "value", "numpy", "tolist", "item", "cpu", "storage", "untyped_storage")
DUNDER_ALLOWED = ("__init__", "__name__", "__qualname__", "__doc__")

HOST_NAMES = TENSOR_MAKERS + (
    "torch.Tensor", "torch.Size", "torch.dtype", "torch.device", "torch.float32", "torch.float", "torch.float16",
    "torch.half", "torch.bfloat16", "torch.float64", "torch.double", "torch.int8", "torch.int16", "torch.int32",
    "torch.int64", "torch.long", "torch.int", "torch.uint8", "torch.bool", "torch.float8_e4m3fn",
    "torch.float8_e5m2", "torch.finfo", "torch.iinfo", "torch.is_tensor", "torch.is_floating_point",
    "torch.no_grad", "torch.enable_grad", "torch.autograd.Function", "torch.autograd.function.once_differentiable",
    "torch.autograd.function.FunctionCtx", "torch.cuda.get_device_properties",
    "torch.cuda.is_available", "torch.cuda.device", "torch.cuda.current_device", "torch.cuda.set_device",
    "torch.cuda.get_device_capability", "torch.cuda.device_count", "torch.cuda.synchronize",
    "torch.amp.custom_fwd", "torch.amp.custom_bwd", "torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd",
    "torch.is_grad_enabled", "torch.get_default_dtype", "torch.promote_types", "torch.contiguous_format",
    "torch.preserve_format", "torch.strided",
    "triton.jit", "triton.autotune", "triton.Config", "triton.heuristics", "triton.cdiv", "triton.next_power_of_2",
    "triton.language.constexpr", "triton.language.float32", "triton.language.float16", "triton.language.bfloat16",
    "triton.language.float64", "triton.language.int32", "triton.language.int64", "triton.language.int8",
    "triton.language.int1", "triton.language.dtype",
    "math.*", "typing.*", "__future__.*", "dataclasses.*", "functools.lru_cache", "functools.cache",
    "functools.partial", "kernels.device.interpreted", "kernels.device.has_cuda", "kernels.device.default_device",
    "kernels.device.triton_available", "warnings.warn", "os.environ", "os.getenv",
)
NUMBER_NAMES = ("math.*", "triton.cdiv", "triton.next_power_of_2")
KERNEL_NAMES = ("triton.language.*", "triton.cdiv", "triton.next_power_of_2", "triton.jit", "math.e", "math.pi",
                "math.inf", "math.log2", "math.log", "math.sqrt")
# What changes other modules at run time: forbidden in every module of a package with a Triton task.
PATCHERS = ("sys.modules", "importlib", "importlib.*", "builtins", "builtins.*", "gc", "gc.*", "inspect",
            "inspect.*")
# What runs code the rules cannot read, or reaches memory around torch: forbidden in every module too.
HIDDEN_CODE = ("exec", "eval", "compile", "open", "breakpoint", "memoryview")
HIDDEN_NAMES = ("ctypes", "ctypes.*", "mmap", "mmap.*", "marshal", "marshal.*", "pickle", "pickle.*", "runpy",
                "runpy.*", "code", "code.*", "codeop", "codeop.*", "subprocess", "subprocess.*", "types.CodeType",
                "types.FunctionType", "types.ModuleType", "sys.path", "sys.path.*", "os.system", "os.popen",
                "os.open", "os.write", "os.fdopen", "os.fork", "os.exec*", "os.spawn*", "torch.from_numpy",
                "torch.frombuffer", "torch.utils.dlpack", "torch.utils.dlpack.*", "numpy.ctypeslib",
                "numpy.ctypeslib.*", "numpy.frombuffer", "numpy.asarray", "numpy.lib.stride_tricks",
                "numpy.lib.stride_tricks.*")
HIDDEN_ATTRIBUTES = ("numpy", "data_ptr", "__array__", "__array_interface__", "__cuda_array_interface__",
                     "__dlpack__", "__code__", "__globals__", "__builtins__", "__closure__")
# What changes an object around the assignment the flow analysis reads (`object.__setattr__(module, "f", g)`,
# `module.__dict__["f"] = g`): forbidden in every module too, as are names built at run time for getattr.
SETTERS = ("__setattr__", "__delattr__", "__dict__", "__getattribute__")
# What takes work out of sight of the worker's observers (launches, stores, torch ops, memory): other threads
# or processes, and leaving the dispatch modes or torch's function modes.
OUT_OF_SIGHT_NAMES = ("threading", "threading.*", "_thread", "_thread.*", "concurrent", "concurrent.*",
                      "multiprocessing", "multiprocessing.*", "torch.utils._python_dispatch",
                      "torch.utils._python_dispatch.*", "torch._C", "torch._C.*", "torch._dispatch",
                      "torch._dispatch.*", "torch.overrides", "torch.overrides.*")
# Attributes whose assignment changes a tensor's storage, gradient or type, whatever object holds them.
TENSOR_STATE = ("data", "grad", "requires_grad", "grad_fn", "storage", "untyped_storage", "set_")
IMPORTS = ("torch", "triton", "triton.language", "math", "typing", "__future__", "dataclasses", "functools",
           "warnings", "os", "kernels", "kernels.device")


@dataclass(frozen=True)
class TritonRules:
    """The rules of one Triton task: `modules` of the package (their host code and kernels, and the
    package code they use), the `tensors` parameters of each entry point ("fn" or "Class.method"; the
    others are numbers, flags or None), and what host and kernel code may use."""

    name: str
    modules: tuple[str, ...]
    tensors: dict[str, tuple[str, ...]]
    section: str  # the handout's section that states the rules, for the messages
    imports: tuple[str, ...] = IMPORTS
    host_names: tuple[str, ...] = HOST_NAMES
    number_names: tuple[str, ...] = NUMBER_NAMES
    kernel_names: tuple[str, ...] = KERNEL_NAMES
    attributes: tuple[str, ...] = METADATA + VIEWS + CONTAINER_METHODS
    builtins: tuple[str, ...] = BUILTINS
    number_builtins: tuple[str, ...] = NUMBER_BUILTINS


HOST_RULE = ("host code of a Triton task may allocate, reshape and launch; the arithmetic belongs in @triton.jit "
             "functions")
KERNEL_RULE = ("a @triton.jit function may use Triton's language (triton.language), other @triton.jit functions, "
               "numbers and constants")


def scan(package_root: Path, package: str, rules: list[TritonRules]) -> list[Violation]:
    """Check the Triton tasks of the package in `package_root` against `rules`; parsed, never imported."""
    package_root = Path(package_root)
    if not package_root.is_dir() or not rules:
        return []
    modules = {}
    for path in sorted(p for p in package_root.rglob("*.py") if p.is_file()):
        rel = path.relative_to(package_root)
        name = ".".join([package, *rel.parent.parts] + ([] if rel.stem == "__init__" else [rel.stem]))
        try:
            tree = ast.parse(path.read_bytes(), filename=rel.as_posix())
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # checks.scan reports it; importing it fails its tests anyway
        modules[name] = _Module(name, rel.as_posix(), tree, rel.stem == "__init__")
    found = []
    for rule in rules:
        try:
            found += _Analysis(rule, modules, package).violations()
        except (RecursionError, MemoryError, ValueError, TypeError, AttributeError, KeyError) as exc:
            # Code this analysis cannot follow: the rule cannot vouch for it, so it holds no Triton point.
            file = f"{rule.modules[0]}.py"
            found.append(Violation(rule.name, file, 0, "", rule.modules, (
                f"{file}: the grader could not analyse this code ({type(exc).__name__}: {str(exc)[:200]}), so it "
                f"cannot tell that the Triton kernels computed the results; simplify it, and if it is plain code, "
                f"tell the course staff (see the handout {rule.section})")))
    return found


HIDDEN_WHY = "which runs code this check cannot read or reaches a tensor's memory around torch"
SIGHT_WHY = "which takes work out of the tests' sight (another thread or process, or outside torch's modes)"


def _hidden(dotted: str) -> bool:
    """A dotted name of HIDDEN_NAMES (`os.exec*` matches every os.exec... function)."""
    return _matches(dotted, HIDDEN_NAMES) or any(p.endswith("*") and not p.endswith(".*") and dotted.startswith(p[:-1])
                                                 for p in HIDDEN_NAMES)


# --- The rules ----------------------------------------------------------------------------------

class _Analysis(FlowAnalysis):
    """The rules over the flow analysis: every module's patching, then host and kernel code unit by unit."""

    def violations(self) -> list[Violation]:
        tasks = [self.modules[name] for name in self.tasks if name in self.modules]
        if not tasks:
            return []
        self._reach(tasks + self._packages_of(tasks))
        for _ in range(30):  # taint only grows: a fixpoint in a few rounds
            before = self._state()
            for unit in self.units:
                self._evaluate(unit)
            if self._state() == before:
                break
        self.reporting = True
        for unit in self.units:
            self._evaluate(unit)
            if isinstance(unit.node, ast.ClassDef) and not unit.kernel and not unit.qualname.endswith("<header>"):
                self._check_class(unit)
        for module in self.modules.values():
            self._patching(module)
        return sorted(self.found.values(), key=lambda v: (v.file, v.line))

    def _packages_of(self, tasks: list[_Module]) -> list[_Module]:
        """The packages' __init__ modules that importing a task module runs first."""
        names = {".".join(m.name.split(".")[:n]) for m in tasks for n in range(1, m.name.count(".") + 1)}
        return [self.modules[name] for name in sorted(names) if name in self.modules]

    def _patching(self, module: _Module) -> None:
        """Any module of the package (the worker imports them all, in one process) may not change another
        module at run time: no assignment into a package module, no sys.modules, importlib, gc, inspect
        or builtins, no `__setattr__` or `__dict__` (SETTERS), no getattr of a name built at run time, no string
        naming a Triton task's module (docstrings aside); nor run code this check cannot read or reach memory
        around torch (HIDDEN_CODE, HIDDEN_NAMES, HIDDEN_ATTRIBUTES), nor work out of the observers' sight: other
        threads or processes, or outside torch's dispatch and function modes (OUT_OF_SIGHT_NAMES)."""
        docstrings = {id(n.value) for n in ast.walk(module.tree) if isinstance(n, ast.Expr)}
        stems = {(m.rpartition(".")[2], m) for m in self.tasks}
        for node in ast.walk(module.tree):
            why = ""
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                    module.absolute(node.module, node.level)]
                why = next((f"imports `{n}`" for n in names if _matches(n, PATCHERS)), "")
                why = why or next((f"imports `{n}`, {HIDDEN_WHY}" for n in names if _hidden(n)), "")
                why = why or next((f"imports `{n}`, {SIGHT_WHY}" for n in names if _matches(n, OUT_OF_SIGHT_NAMES)), "")
                if not why and isinstance(node, ast.ImportFrom):
                    why = next((f"imports `{names[0]}.{a.name}`, {HIDDEN_WHY}" for a in node.names
                                if _hidden(f"{names[0]}.{a.name}") or a.name in HIDDEN_CODE), "")
            elif isinstance(node, ast.Attribute):
                chain = _dotted(node)
                dotted = ".".join([module.aliases[chain[0]], *chain[1]]) if chain and chain[0] in module.aliases else ""
                if not isinstance(node.ctx, ast.Load) and dotted.rpartition(".")[0] in self.modules:
                    why = f"changes `{dotted}`, a module of the package"
                elif not isinstance(node.ctx, ast.Load):
                    why = self._foreign_store(node, chain, dotted)
                elif dotted and _matches(dotted, PATCHERS) and not isinstance(_parent(node), ast.Attribute):
                    why = f"uses `{dotted}`"
                elif dotted and _hidden(dotted) and not isinstance(_parent(node), ast.Attribute):
                    why = f"uses `{dotted}`, {HIDDEN_WHY}"
                elif dotted and _matches(dotted, OUT_OF_SIGHT_NAMES) and not isinstance(_parent(node), ast.Attribute):
                    why = f"uses `{dotted}`, {SIGHT_WHY}"
                elif node.attr in HIDDEN_ATTRIBUTES:
                    why = f"uses `.{node.attr}`, {HIDDEN_WHY}"
                elif node.attr in SETTERS:
                    why = f"uses `.{node.attr}`, which changes an object around the assignments this check reads"
            elif isinstance(node, ast.Name) and node.id in ("__import__", "setattr", "delattr", "globals", "vars"):
                why = f"uses `{node.id}`"
            elif isinstance(node, ast.Name) and node.id in HIDDEN_CODE:
                why = f"uses `{node.id}`, {HIDDEN_WHY}"
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                  and len(node.args) >= 2 and not (isinstance(node.args[1], ast.Constant)
                                                   and isinstance(node.args[1].value, str)
                                                   and (not node.args[1].value.startswith("__")
                                                        or node.args[1].value in DUNDER_ALLOWED))):
                why = "uses `getattr` with a name built at run time or a dunder, which this check cannot follow"
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                  and module.name not in self.tasks
                  and any(node.value.strip() in (stem, task) or task in node.value for stem, task in stems)):
                why = "names a Triton task's module in a string"
            if why and (module.file, node.lineno) not in self.found:
                text = " ".join(ast.unparse(node).split())[:80]
                self.found[(module.file, node.lineno)] = Violation(
                    self.rule.name, module.file, node.lineno, text, self.rule.modules,
                    f"{module.file} line {node.lineno}: `{text}` {why} (no module of the package may change "
                    f"another while the tests run: the Triton tasks must run their own code; see the handout "
                    f"{self.rule.section})")
                self.ranks[(module.file, node.lineno)] = 0

    def _foreign_store(self, node: ast.Attribute, chain, dotted: str) -> str:
        """Why assigning (or deleting) `node`, an attribute, changes what is not the code's own, or "": the
        worker imports torch, Triton and the grader's modules in the same process, so `triton.compile = f`,
        `torch.Tensor.__add__ = f` or `tl.dot = f` would change what the grader runs and observes there. Host
        code may set attributes of a method's first argument (`self`, an autograd Function's `ctx`) and of the
        objects a function makes from the package's own classes, never their dunders nor a tensor's data."""
        text = ast.unparse(node)
        packages = {name.partition(".")[0] for name in self.modules}
        if dotted and dotted.partition(".")[0] not in packages:
            return f"changes `{dotted}`, which the grader's process shares"
        if chain is None:
            return f"changes an attribute of `{ast.unparse(node.value)}`, not a name of its own function"
        root, attrs = chain
        if any(a.startswith("__") and a.endswith("__") for a in attrs) or attrs[-1] in TENSOR_STATE:
            return f"changes `{text}`, an object's type, its dunders or a tensor's state"
        classes = self._own_classes
        if dotted or root in classes:
            return ""  # the package's own classes and objects: the flow analysis follows what they hold
        function = _parent(node)
        while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            function = _parent(function)
        if function is None:
            return f"changes `{text}` at import, not an argument of a function"
        # Every binding of the name in the function (assignments, loops, `with`, `:=`, parameters of nested
        # functions, global and nonlocal): a name bound once from one of the package's classes, or a method's
        # first argument never bound again, is the code's own object; any other binding may be anything.
        bound = [n for n in ast.walk(function) if (isinstance(n, ast.Name) and n.id == root and not isinstance(
            n.ctx, ast.Load)) or (isinstance(n, ast.arg) and n.arg == root) or (isinstance(n, (ast.Global, ast.Nonlocal))
                                                                            and root in n.names)]
        first = [*function.args.posonlyargs, *function.args.args][:1]
        if isinstance(_parent(function), ast.ClassDef) and first and root == first[0].arg and bound == [first[0]]:
            return ""  # self, cls, an autograd Function's ctx
        made = [_parent(n) for n in bound]
        if bound and all(isinstance(n, ast.Name) and isinstance(a, ast.Assign) and a.targets == [n]
                         and isinstance(a.value, ast.Call) and isinstance(a.value.func, ast.Name)
                         and a.value.func.id in classes for n, a in zip(bound, made)):
            return ""
        return f"changes an attribute of `{root}`, which is neither the first argument of a method (self, ctx) " \
               "nor made in its function from one of the package's classes"

    @functools.cached_property
    def _own_classes(self) -> set[str]:
        """The names of the package's top-level classes that nothing else binds: no assignment, parameter,
        function, import or global of the same name anywhere in the package."""
        classes, other = set(), set()
        for m in self.modules.values():
            classes |= {n.name for n in m.tree.body if isinstance(n, ast.ClassDef)}
            other |= set(m.aliases)
            for n in ast.walk(m.tree):
                if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                    other.add(n.id)
                elif isinstance(n, ast.arg):
                    other.add(n.arg)
                elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    other.add(n.name)
                elif isinstance(n, (ast.Global, ast.Nonlocal)):
                    other |= set(n.names)
                elif isinstance(n, ast.ClassDef) and n not in m.tree.body:
                    other.add(n.name)
        return classes - other

    # -- the rules

    def _hit(self, node: ast.AST, unit: _Unit, why: str, rank: int = 0) -> None:
        """Record a finding; one per line, the one that names what is used (rank 0) before arithmetic."""
        key = (unit.module.file, node.lineno)
        if key in self.found and self.ranks[key] <= rank:
            return
        self.ranks[key] = rank
        text = " ".join(ast.unparse(node).split())
        text = text if len(text) <= 80 else text[:77] + "..."
        rule, where = (KERNEL_RULE, "a @triton.jit function") if unit.kernel else (HOST_RULE, "host code")
        self.found[key] = Violation(
            self.rule.name, unit.module.file, node.lineno, text, self.rule.modules,
            f"{unit.module.file} line {node.lineno}: `{text}` {why}, in {where} ({rule}; see the handout "
            f"{self.rule.section})")

    def _refuse(self, node: ast.AST, unit: _Unit, why: str) -> None:
        self._hit(node, unit, why, 0)

    def _check_class(self, unit: _Unit) -> None:
        """A class of host code: no special methods but __init__ (they run on operators, loops, `with`,
        indexing, where the analysis cannot see them), no method or attribute named like a tensor's
        metadata or views (`box.size()` would read as a number)."""
        for statement in unit.node.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [statement.name]
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            else:
                continue
            for name in names:
                if name.startswith("__") and name.endswith("__") and name not in DUNDER_METHODS:
                    self._refuse(statement, unit, f"defines `{name}`, a special method the grader cannot follow "
                                                  "(use a plain method, called by name)")
                elif name in METADATA + VIEWS and not name.startswith("__"):
                    self._refuse(statement, unit, f"defines `{name}`, a name tensors use for their metadata and "
                                                  "views (rename it)")

    def _check(self, node: ast.AST, unit: _Unit) -> None:
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            word = "global" if isinstance(node, ast.Global) else "nonlocal"
            self._refuse(node, unit, f"declares `{word} {', '.join(node.names)}`: the grader cannot follow what "
                                     "functions keep in names outside them (pass values as arguments and return them)")
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr in MUTATORS
              and not _is_call_of(node)):
            self._refuse(node, unit, f"uses `.{node.attr}` as a value: the grader cannot follow what it is given "
                                     "(call it)")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if unit.module.name in self.tasks or not isinstance(unit.node, ast.Module):
                self._check_import(node, unit)  # another module's imports count where they are used
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            self._check_name(node, unit)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            self._check_attribute(node, unit)
        elif isinstance(node, (ast.BinOp, ast.AugAssign)):
            operands = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.target, node.value]
            if isinstance(node.op, ast.MatMult):
                self._hit(node, unit, "multiplies matrices (`@`)", 1)
            elif any(self._taint(o, unit) for o in operands):
                self._hit(node, unit, "computes with a tensor's values", 2)
        elif isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
            if self._taint(node.operand, unit):
                self._hit(node, unit, "computes with a tensor's values", 2)
        elif isinstance(node, ast.Compare):
            if (not all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
                    and any(self._taint(o, unit) for o in [node.left, *node.comparators])):
                self._hit(node, unit, "compares a tensor's values", 2)
        elif isinstance(node, ast.Call):
            self._check_call(node, unit)

    def _check_import(self, node: ast.AST, unit: _Unit) -> None:
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = unit.module.absolute(node.module, node.level)
            if self._in_package(base):
                return
            if base not in self.rule.imports:
                targets = [f"{base}.{a.name}" if a.name != "*" else base for a in node.names]
            else:
                targets = [f"{base}.{a.name}" for a in node.names if a.name != "*"]
                targets = [t for t in targets if t not in self.rule.imports and not _matches(t, self.rule.host_names)]
                for target in targets:
                    self._hit(node, unit, f"imports `{target}`, which is not on the list host code may use")
                return
        for target in targets:
            if not self._in_package(target) and target not in self.rule.imports:
                self._hit(node, unit, f"imports `{target}` (host code may import only "
                                      f"{', '.join(self.rule.imports)} and the package's own modules)")

    def _check_name(self, node: ast.Name, unit: _Unit) -> None:
        kind = self._lookup(node.id, unit)
        if kind[0] == "builtin" and node.id not in self.rule.builtins + self.rule.number_builtins:
            self._hit(node, unit, f"uses `{node.id}`, which is neither defined here nor a builtin host code may "
                                  "use (no eval, exec, globals, setattr ...: no names built at run time)")
        elif (kind[0] == "alias" and not isinstance(_parent(node), ast.Attribute) and not self._in_package(kind[1])
              and not _matches(kind[1], self.rule.host_names)):
            self._hit(node, unit, f"uses `{kind[1]}`, which is not on the list host code may use")

    def _check_attribute(self, node: ast.Attribute, unit: _Unit) -> None:
        dotted = self._resolve(node, unit)
        if dotted is None:
            self._check_attribute_name(node, node.attr, unit)
            return
        if isinstance(_parent(node), ast.Attribute):
            return  # the outermost attribute of a chain is checked
        parts = dotted.split(".")
        if self._in_package(dotted):
            found = [n for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in self.modules]
            for attr in parts[found[0] + 1:] if found else ():  # after the package's function or name
                self._check_attribute_name(node, attr, unit)
            return
        allowed = [n for n in range(1, len(parts) + 1) if _matches(".".join(parts[:n]), self.rule.host_names)]
        if not allowed:
            self._hit(node, unit, f"uses `{dotted}`, which is not on the list host code may use")
            return
        for attr in parts[max(allowed):]:
            self._check_attribute_name(node, attr, unit)

    def _check_attribute_name(self, node: ast.AST, attr: str, unit: _Unit) -> None:
        if attr.startswith("__") and attr.endswith("__"):
            if attr not in DUNDER_ALLOWED:
                self._hit(node, unit, f"uses `{attr}` (no dunder attributes)")
        elif attr not in self.rule.attributes and (attr not in self.user_attributes or attr in self.tensor_attributes):
            self._hit(node, unit, f"uses `.{attr}`, which is not among the methods host code may call (views, "
                                  "casts, copies, shapes and strides)")

    def _check_call(self, node: ast.Call, unit: _Unit) -> None:
        func = node.func
        builtin = isinstance(func, ast.Name) and self._lookup(func.id, unit)[0] == "builtin"
        if builtin and func.id == "getattr":
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                base = self._resolve(node.args[0], unit)
                if node.args[1].value in MUTATORS:
                    self._refuse(node, unit, f"looks up `{node.args[1].value}` by name: the grader cannot follow "
                                             "what it is given (call the method)")
                elif base is None:
                    self._check_attribute_name(node, node.args[1].value, unit)
                elif not _matches(f"{base}.{node.args[1].value}", self.rule.host_names):
                    self._hit(node, unit, f"uses `{base}.{node.args[1].value}`, which is not on the list host code "
                                          "may use")
            else:
                self._hit(node, unit, "looks up an attribute by a name built at run time")
            return
        dotted = self._resolve(func, unit)
        numbers = (builtin and func.id in self.rule.number_builtins) or bool(
            dotted and _matches(dotted, self.rule.number_names))
        if numbers and self._arguments(node, unit):
            self._hit(node, unit, "computes with a tensor's values or turns them into Python numbers", 2)
        callee = self._function(func, unit)
        if callee is not None and callee.kernel:
            self._hit(node, unit, "calls a @triton.jit function directly (launch it: kernel[grid](...))")
        if isinstance(func, ast.Subscript):
            self._check_launch(node, unit)

    def _check_launch(self, node: ast.Call, unit: _Unit) -> None:
        """A tl.constexpr parameter takes a number, a flag or a dtype, never a tensor: the interpreter
        would hand the kernel the torch tensor itself, and torch would do the arithmetic."""
        kernel = self._function(node.func.value, unit)
        if kernel is None or not kernel.kernel:
            return
        args = kernel.node.args
        names = [a.arg for a in args.posonlyargs + args.args]
        constexprs = _constexprs(kernel.node)
        for position, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred):
                break
            if position < len(names) and names[position] in constexprs and self._taint(arg, unit):
                self._hit(node, unit, f"passes a tensor as the tl.constexpr argument {names[position]}")
        for keyword in node.keywords:
            if (keyword.arg is None or keyword.arg in constexprs) and self._taint(keyword.value, unit):
                self._hit(node, unit, f"passes a tensor as the tl.constexpr argument {keyword.arg or '(**)'}")

    def _check_kernel(self, node: ast.AST, unit: _Unit) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Lambda)):
            self._hit(node, unit, "imports a module" if not isinstance(node, ast.Lambda) else "defines a lambda")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            kind = self._lookup(node.id, unit)
            target = self._function(node, unit)
            if kind[0] == "builtin" and node.id not in KERNEL_BUILTINS:
                self._hit(node, unit, f"uses `{node.id}`")
            elif kind[0] == "global" and kind[1]:
                self._hit(node, unit, f"uses the module-level tensor `{node.id}`")
            elif kind[0] == "def" and (target is None or not target.kernel):
                self._hit(node, unit, f"uses `{node.id}`, which is not a @triton.jit function")
            elif kind[0] == "alias" and not isinstance(_parent(node), ast.Attribute):
                if self._in_package(kind[1]) and (target is None or not target.kernel):
                    self._hit(node, unit, f"uses `{kind[1]}`, which is not a @triton.jit function")
                elif not self._in_package(kind[1]) and not _matches(kind[1], self.rule.kernel_names):
                    self._hit(node, unit, f"uses `{kind[1]}`")
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            dotted = self._resolve(node, unit)
            if dotted is not None:
                if isinstance(_parent(node), ast.Attribute) or self._in_package(dotted):
                    return
                parts = dotted.split(".")
                if not any(_matches(".".join(parts[:n]), self.rule.kernel_names) for n in range(1, len(parts) + 1)):
                    self._hit(node, unit, f"uses `{dotted}`")
            elif (node.attr.startswith("__") and node.attr.endswith("__")) or node.attr in KERNEL_DENIED:
                self._hit(node, unit, f"uses `.{node.attr}`, which leaves Triton's language")
