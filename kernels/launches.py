"""Record the Triton kernels launched inside a block, compiled on a GPU or interpreted on a CPU.

    with record_launches() as launches:
        o, lse = flash_forward_triton(q, k, v)
    launches.names     # ["_flash_fwd_kernel"], in launch order
    launches.count     # 1
    launches.counts()  # {"_flash_fwd_kernel": 1}

The graders use it to check that a Triton task really launches a Triton kernel (and is not, say,
PyTorch code behind a Triton-looking name).

How: `kernel[grid](*args)` ends in the `run` method of the kernel object, `triton.runtime.jit.
JITFunction` when compiled and `triton.runtime.interpreter.InterpretedFunction` under
TRITON_INTERPRET=1 (an autotuner's or heuristic's `run` calls the inner kernel's `run`, so each real
launch is seen once). That method has been `run(self, *args, grid, warmup, **kwargs)` from Triton 3.0
through 3.9; the recorder wraps it on both classes and restores the originals on exit. Calls with
`warmup=True` compile without running and are not counted.

Each launch is also kept as plain data in `launches.launches`: the kernel's module and name, each
argument's kind and Triton type ("*bf16" for a bf16 tensor, "i32", "fp32", or a constexpr's value) and
the launch options (num_warps, num_stages). `record_launches(dry_run=True)` records without running
anything, and with each argument Triton's specialisation of it (specialization(), below): with Triton
compiling (TRITON_INTERPRET unset) and fake CUDA tensors, host code takes its
GPU path on a machine without a GPU and the recorder sees what it would launch there
(kernels.crosscompile builds those launches for a named GPU). An autotuned kernel's configs are
recorded with it; a dry run passes its first config on.

Specialisation: a GPU launch compiles the kernel for what it is given. An integer argument equal to 1
(a unit stride) becomes a constant, and pointers and integers divisible by 16 are marked
`tt.divisibility = 16`; only then are loads known to be contiguous and aligned, and only then does the
software pipeliner copy tiles asynchronously into `num_stages` buffers (a build without it needs less
shared memory than the GPU's). The dry run asks Triton's own launcher code for it
(`create_function_from_signature`, the binder JITFunction.run calls, and JITFunction._pack_args; the
same in Triton 3.6 and 3.9). A fake tensor has no memory, so its data pointer is assumed to be where a
CUDA allocation puts it: at a multiple of 256 bytes (cudaMalloc's alignment, kept by PyTorch's caching
allocator), plus the tensor's storage offset in bytes; so a view such as `x[1:]` of a bf16 matrix with 7
columns is not 16-byte aligned, as on a GPU. Where Triton lacks that code the launch is described
without it and says why ("specialization_error"): its builds are then unspecialised.
"""

from __future__ import annotations

import importlib
import inspect
from collections import Counter
from contextlib import contextmanager
from typing import Any, Iterator

import kernels  # noqa: F401  (select the interpreter before Triton is imported)

# The classes whose `run` a launch goes through: compiled, then interpreted.
_LAUNCHERS = (("triton.runtime.jit", "JITFunction"), ("triton.runtime.interpreter", "InterpretedFunction"))
# Keyword arguments of a launch that are options of the build, not arguments of the kernel.
_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
# Where a CUDA allocation starts: a multiple of 256 bytes (CUDA C++ Programming Guide, "Device Memory
# Accesses": cudaMalloc's alignment). Any such base gives the same specialisation; this one is not 0.
_ALLOCATION_BASE = 256 * 4096
_TRITON_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "i8",
                 "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1"}


class LaunchRecord:
    """The kernels launched inside a `record_launches()` block, by the Python name of their function."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.launches: list[dict] = []  # plain data, one per launch: see describe_launch

    @property
    def count(self) -> int:
        return len(self.names)

    def counts(self) -> dict[str, int]:
        return dict(Counter(self.names))


def _kernel_name(kernel) -> str:
    fn = getattr(kernel, "fn", None)
    return getattr(fn, "__name__", None) or getattr(kernel, "__name__", type(kernel).__name__)


def _triton_type(value: Any) -> str:
    """The Triton signature type of a non-constexpr argument: "*bf16" for a bf16 tensor, "i32", "fp32"."""
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in _TRITON_TYPES:
            raise TypeError(f"a tensor of dtype {dtype} cannot be a Triton kernel argument")
        return "*" + _TRITON_TYPES[dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"cannot type a Triton kernel argument of type {type(value).__name__}")


def _is_constexpr(parameter: inspect.Parameter) -> bool:
    """Triton's own rule: the annotation names constexpr (tl.constexpr, or the string "tl.constexpr")."""
    annotation = parameter.annotation
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    return "constexpr" in text


def _plain(value: Any) -> Any:
    """A constexpr's value as plain data (Triton's constexpr wrapper unwrapped)."""
    value = getattr(value, "value", value)
    return value if value is None or isinstance(value, (bool, int, float, str)) else repr(value)


def describe_launch(kernel, args: tuple, kwargs: dict, specialize: bool = False) -> dict:
    """One launch as plain data: {"name", "module", "args": [{"name", "type"} or {"name", "constexpr"}],
    "options": {num_warps, num_stages, ...}, "configs": []}. Arguments that cannot be typed get "type": None
    and an "error"; the launch itself is unaffected. With `specialize`, each argument also carries what a GPU
    launch specialises it to (specialization(): "constexpr": 1 or "divisibility": 16), or the launch says
    why it could not be had ("specialization_error")."""
    fn = getattr(kernel, "fn", kernel)
    params = list(inspect.signature(fn).parameters.values())
    bound = dict(zip((p.name for p in params), args))
    bound.update({k: v for k, v in kwargs.items() if k not in _OPTIONS and k not in ("grid", "warmup")})
    described = []
    for p in params:
        value = bound.get(p.name, p.default)
        # A tl.constexpr value (LOG2E / math.sqrt(d)) is a constant of the build whatever the parameter's
        # annotation: a GPU launch specialises it so.
        if _is_constexpr(p) or value is None or type(value).__name__ == "constexpr":
            described.append({"name": p.name, "constexpr": _plain(None if value is inspect.Parameter.empty else value)})
            continue
        try:
            described.append({"name": p.name, "type": _triton_type(value)})
        except TypeError as exc:
            described.append({"name": p.name, "type": None, "error": str(exc)})
    launch = {"name": _kernel_name(kernel), "module": getattr(fn, "__module__", ""), "args": described,
              "options": {k: kwargs[k] for k in _OPTIONS if isinstance(kwargs.get(k), int)}, "configs": []}
    if specialize:
        try:
            found = specialization(kernel, args, kwargs)
        except Exception as exc:  # noqa: BLE001  (an unspecialised description is still right, only less exact)
            launch["specialization_error"] = f"{type(exc).__name__}: {exc}"
        else:
            for arg in described:
                arg.update(found.get(arg["name"], {}) if "type" in arg and arg["type"] else {})
    return launch


class _DataPointer:
    """A tensor argument as Triton's specialisation reads it: its dtype and data pointer (a fake tensor has none)."""

    def __init__(self, tensor) -> None:
        self.dtype = tensor.dtype
        self._address = _ALLOCATION_BASE + tensor.storage_offset() * tensor.element_size()

    def data_ptr(self) -> int:
        return self._address


def specialization(kernel, args: tuple, kwargs: dict) -> dict[str, dict]:
    """{argument name: what a GPU launch specialises it to}: {"constexpr": 1} for an integer equal to 1,
    {"divisibility": 16} for a pointer or integer divisible by 16; arguments without either are left out.

    Computed by Triton's own launcher code for an NVIDIA target (the module docstring says which and how
    a fake tensor's data pointer is taken). Raises when this Triton lacks that code.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    fn = kernel
    if not all(hasattr(fn, name) for name in ("signature", "params", "_pack_args")):
        raise TypeError(f"Triton {triton.__version__}: {type(fn).__name__} has no signature, params or _pack_args")
    backend = make_backend(GPUTarget("cuda", 90, 32))  # NVIDIA's rules are the same for every architecture
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    launch = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
    args = tuple(_DataPointer(a) if hasattr(a, "storage_offset") else a for a in args)
    launch = {k: _DataPointer(v) if hasattr(v, "storage_offset") else v for k, v in launch.items()}
    bound, specialized, options = binder(*args, **launch)
    _, signature, constexprs, attrs = fn._pack_args(backend, launch, bound, specialized, options)
    found = {}
    for i, param in enumerate(fn.params):
        if signature.get(param.name) == "constexpr" and not param.is_constexpr and (i,) in constexprs:
            found[param.name] = {"constexpr": _plain(constexprs[(i,)])}
        elif ["tt.divisibility", 16] in attrs.get((i,), []):
            found[param.name] = {"divisibility": 16}
    return found


def _config(config) -> dict:
    """An autotune config as plain data: its constexpr kwargs and its options."""
    options = {k: getattr(config, k) for k in _OPTIONS if isinstance(getattr(config, k, None), int)}
    return {"kwargs": {k: _plain(v) for k, v in dict(getattr(config, "kwargs", {})).items()}, **options}


def _launcher_classes() -> list[type]:
    found = []
    for module_name, class_name in _LAUNCHERS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # no triton here (macOS, Windows): nothing can launch, nothing to wrap
            continue
        cls = getattr(module, class_name, None)
        if cls is not None and callable(getattr(cls, "run", None)):
            found.append(cls)
    return found


def _autotuner_class() -> type | None:
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return None
    return Autotuner


@contextmanager
def record_launches(dry_run: bool = False) -> Iterator[LaunchRecord]:
    """Record each Triton kernel launched inside the block; the launch path is restored on exit.

    dry_run: record each launch without running (or compiling) it; the kernel call returns None.
    """
    record = LaunchRecord()
    originals = {cls: cls.__dict__.get("run") for cls in _launcher_classes()}
    pending_configs: list[list[dict]] = []  # an autotuner's configs, for the launch it passes on

    def wrap(cls: type):
        inner = getattr(cls, "run")

        def run(self, *args, **kwargs):
            if not kwargs.get("warmup", False):
                record.names.append(_kernel_name(self))
                try:
                    record.launches.append(describe_launch(self, args, kwargs, specialize=dry_run))
                except Exception as exc:  # noqa: BLE001  (describing must never break the launch itself)
                    record.launches.append({"name": _kernel_name(self), "error": f"{type(exc).__name__}: {exc}"})
                if pending_configs:
                    record.launches[-1]["configs"] = pending_configs.pop()
            if dry_run:
                return None
            return inner(self, *args, **kwargs)

        return run

    def tune(self, *args, **kwargs):
        """Autotuner.run in a dry run: no timing (it needs a GPU); its first config is passed on."""
        pending_configs.append([_config(c) for c in self.configs])
        first = self.configs[0]
        return self.fn.run(*args, **{**kwargs, **first.all_kwargs()})

    autotuner = _autotuner_class() if dry_run else None
    if autotuner is not None:
        originals[autotuner] = autotuner.__dict__.get("run")
        autotuner.run = tune
    for cls in originals:
        if cls is not autotuner:
            cls.run = wrap(cls)
    try:
        yield record
    finally:
        for cls, original in originals.items():
            if original is None:  # `run` was inherited: drop our override to expose it again
                del cls.run
            else:
                cls.run = original
