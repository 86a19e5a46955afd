"""The handouts' generated regions: the rules the static checks hold a submission to, written from the
definitions those checks run, so that a handout cannot say one thing while the grader checks another.

A region is two marker lines in a handout (HTML comments: invisible once the Markdown is rendered)

    <!-- BEGIN GENERATED: forbidden -->
    ...written by `render`, never by hand...
    <!-- END GENERATED: forbidden -->

and its kind says what is written between them, for the package whose handout it is:

- `forbidden`: the package's static rules (autograder/suites/<package>/rules.py, RULES, and the rule every
  submission is held to, checks.GRADER_RULE): which modules may not use which names, or must use them, and why.
- `host-code`: what the host code and the kernels of the package's Triton tasks may use
  (autograder/suites/<package>/rules.py, TRITON_RULES, over autograder/static/triton_rules.py's lists).

`make assignments` (autograder.authoring.stubs) rewrites every region of solutions/<package>/README.md and
the students' copy; `--check`, and so the test that assignments/ is in sync, fails when a handout's region
differs from what the rules give today.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable

from autograder.model.markers import MarkerError
from autograder.static import flow, triton_rules
from autograder.static.checks import EVERY_MODULE, GRADER_RULE, Rule

BEGIN = re.compile(r"^<!-- BEGIN GENERATED: ([\w-]+) -->$")
END = re.compile(r"^<!-- END GENERATED: ([\w-]+) -->$")
EXCEPTIONS = ("Error", "Exception", "Warning")
NOTE = ("*Generated from the grader's own rule definitions by `make assignments`: this is exactly what the static "
        "checks check.*")


def _rules(package: str, name: str, path: str) -> list:
    try:
        module = importlib.import_module(f"autograder.suites.{package}.rules")
    except ModuleNotFoundError:
        raise MarkerError(path, 0, f"a generated region needs autograder/suites/{package}/rules.py") from None
    return list(getattr(module, name, []))


def _code(names: Iterable[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def _modules(rule: Rule) -> str:
    if rule.modules == (EVERY_MODULE,):
        return "every module"
    return ", ".join(f"`{m}`" if "." in m else f"`{m}.py`" for m in rule.modules)


def _reason(rule: Rule) -> str:
    """The rule's reason as the handout states it: without the pointer back to the handout."""
    return re.sub(r";? *see the handout.*$", "", rule.reason).strip() + "."


def forbidden(package: str, path: str) -> list[str]:
    """The table of the package's static rules; rules with the same names and reason share a row."""
    rows: dict[tuple, list[str]] = {}
    for rule in _rules(package, "RULES", path) + [GRADER_RULE]:
        key = (rule.forbidden, rule.required, _reason(rule), rule.imports_only, rule.stores_only)
        rows.setdefault(key, []).append(_modules(rule))
    lines = ["| where | may not use | must call | why |", "|---|---|---|---|"]
    for (names, required, reason, imports_only, stores_only), where in rows.items():
        banned = _code(names) + (" (imported)" if imports_only and names else "")
        banned = f"an attribute of {banned} assigned or deleted" if stores_only and names else banned
        lines.append(f"| {', '.join(where)} | {banned or '—'} | {_code(required) or '—'} | {reason} |")
    return lines


def _split(names: Iterable[str], prefix: str) -> list[str]:
    return [name for name in names if name.startswith(prefix)]


def _host_table(rule: triton_rules.TritonRules) -> list[str]:
    others = [n for n in rule.host_names if n not in flow.TENSOR_MAKERS]
    views = [a for a in rule.attributes if a in flow.VIEWS]
    # data_ptr is metadata to the flow analysis, but a rule forbids it (HIDDEN_ATTRIBUTES): not listed as allowed.
    metadata = [a for a in rule.attributes
                if a in flow.METADATA and not a.startswith("__") and a not in triton_rules.HIDDEN_ATTRIBUTES]
    plain = [a for a in rule.attributes if a not in flow.VIEWS + flow.METADATA]
    return [
        "| host code may use | |",
        "|---|---|",
        f"| modules to import | {_code(rule.imports)}, and the package's own modules |",
        f"| allocations | {_code(flow.TENSOR_MAKERS)} |",
        f"| methods of a tensor (and of an autograd Function's `ctx`): views, casts, copies | {_code(views)} |",
        f"| attributes of a tensor: its metadata (numbers) | {_code(metadata)} |",
        f"| methods of strings, lists and dicts | {_code(plain)} |",
        f"| torch, triton and other names | {_code(_split(others, 'torch.'))}; {_code(_split(others, 'triton.'))}; "
        f"{_code(n for n in others if not n.startswith(('torch.', 'triton.')))} |",
        f"| on numbers only (shapes, strides, lengths) | {_code(rule.number_names)}; the builtins "
        f"{_code(rule.number_builtins)} |",
        f"| builtins, on anything | {_code(b for b in rule.builtins if not b.endswith(EXCEPTIONS))}, and the "
        f"exceptions and warnings {_code(b for b in rule.builtins if b.endswith(EXCEPTIONS))} |",
        f"| special methods a class may define | {_code(flow.DUNDER_METHODS)} |",
        f"| dunder attributes it may read | {_code(triton_rules.DUNDER_ALLOWED)} |",
    ]


def host_code(package: str, path: str) -> list[str]:
    """What the host code and the kernels of the package's Triton tasks may use."""
    rules = _rules(package, "TRITON_RULES", path)
    if not rules:
        raise MarkerError(path, 0, f"a host-code region needs TRITON_RULES in autograder/suites/{package}/rules.py")
    entry = "; ".join(f"`{fn}`: {_code(params)}" for rule in rules for fn, params in rule.tensors.items())
    lines = [f"The tensors the analysis starts from, the tensor arguments of the contract's functions: {entry}.", ""]
    tables = {}
    for rule in rules:
        tables.setdefault(tuple(_host_table(rule)), []).append(rule.name)
    for table, names in tables.items():
        if len(tables) > 1:
            lines += [f"For {', '.join(names)}:", ""]
        lines += [*table, ""]
    lines += [
        f"Kernel code (the `@triton.jit` functions) may use {_code(triton_rules.KERNEL_NAMES)}, other "
        f"`@triton.jit` functions, numbers, module-level constants (`tl.constexpr` ones: a GPU build, and "
        f"`make test` with it, refuses any other global) and the builtins "
        f"{_code(triton_rules.KERNEL_BUILTINS)}; not the attributes {_code(triton_rules.KERNEL_DENIED)} "
        "(the interpreter's insides).",
        "",
        f"No module of the package may use {_code(triton_rules.PATCHERS)}, `setattr`, `delattr`, `globals`, "
        f"`vars`, `__import__`, the attributes {_code(triton_rules.SETTERS)} (`object.__setattr__(module, ...)` "
        "is an assignment too) or `getattr` of a name built at run time or of a dunder (but "
        f"{_code(triton_rules.DUNDER_ALLOWED)}), assign into another "
        "module of the package, or name a Triton task's module in a string outside its docstrings; nor work "
        f"where the grader's observers cannot see it, in another thread or process or outside torch's modes: "
        f"{_code(triton_rules.OUT_OF_SIGHT_NAMES)}; nor assign or delete an attribute of anything but a method's first "
        "argument (`self`, an autograd Function's `ctx`), one of the package's own classes or an object its "
        "function made from one (`triton.compile = f`, `torch.cuda.is_available = f` or `tl.dot = f` would "
        "change what the grader's process runs), and never a dunder or "
        f"{_code(triton_rules.TENSOR_STATE)}; nor run code this check cannot read or reach a tensor's memory around "
        f"torch: {_code(triton_rules.HIDDEN_CODE)}, {_code(triton_rules.HIDDEN_NAMES)} and the attributes "
        f"{_code(triton_rules.HIDDEN_ATTRIBUTES)}. Under the interpreter the grader also keeps every store of "
        "your kernels: a Triton task's result counts only where each of its elements holds what a store of your "
        "package's kernels wrote there (host code may view, copy and cast it, not overwrite it).",
    ]
    return lines


KINDS = {"forbidden": forbidden, "host-code": host_code}


def render(kind: str, package: str, path: str) -> list[str]:
    """The lines of one region, between its markers."""
    if kind not in KINDS:
        raise MarkerError(path, 0, f"unknown generated region {kind!r}; the kinds are {', '.join(KINDS)}")
    return ["", NOTE, "", *KINDS[kind](package, path), ""]


def fill(text: str, package: str, path: str) -> str:
    """The handout with every generated region rewritten; MarkerError for an unbalanced or unknown region."""
    out, kind, begin = [], None, 0
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        opened, closed = BEGIN.match(line), END.match(line)
        if kind is None:
            if closed:
                raise MarkerError(path, number, f"END GENERATED: {closed.group(1)} without a BEGIN")
            out.append(line)
            if opened:
                kind, begin = opened.group(1), number
                try:
                    out += render(kind, package, path)
                except MarkerError as exc:
                    raise MarkerError(path, number, exc.problem) from None
        elif opened:
            raise MarkerError(path, number, f"BEGIN GENERATED: {opened.group(1)} inside the region of line {begin}")
        elif closed:
            if closed.group(1) != kind:
                raise MarkerError(path, number, f"END GENERATED: {closed.group(1)} closes the {kind} region "
                                                f"of line {begin}")
            out.append(line)
            kind = None
    if kind is not None:
        raise MarkerError(path, begin, f"BEGIN GENERATED: {kind} without an END")
    return "\n".join(out)
