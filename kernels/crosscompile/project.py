"""The project's own kernels: what `make gpu-compile` builds (FlashAttention of a tree, the demos, gpu_kernels)."""

from __future__ import annotations

import json
from pathlib import Path

from kernels.crosscompile.compiler import Build, builds_for
from kernels.crosscompile.dryrun import AutogradContext, gpu_launches, torch_dtype, unique_launches

ROOT = Path(__file__).resolve().parents[2]
DTYPES = ("bf16", "fp16")


def autograd_function_call(function, make, shape: tuple, dtype, is_causal: bool) -> None:
    """function.forward then function.backward (an autograd.Function's), on fake tensors of `shape`."""
    ctx = AutogradContext()
    q, k, v = (make(*shape, dtype=dtype) for _ in range(3))
    function.forward(ctx, q, k, v, is_causal)
    function.backward(ctx, make(*shape, dtype=dtype))


def flash_attention_call(tree: str, dtype: str, head_dim: int, is_causal: bool, n: int = 256):
    """A call that runs tree's FlashAttentionTriton forward and backward (default tiles) as on a GPU."""

    def call(make):
        import importlib

        from kernels import impl

        impl.activate(impl.resolve(tree, ROOT))
        function = importlib.import_module("flash_attention.flash_triton").FlashAttentionTriton
        autograd_function_call(function, make, (1, 2, n, head_dim), torch_dtype(dtype), is_causal)

    return call


def demos_call(dtype: str):
    def call(make):
        from kernels import demos

        x = make(4096, dtype=torch_dtype(dtype))
        demos.add(x, x)
        demos.gelu(x)

    return call


# gpu_kernels' entry points at the shapes they are built for: {name: [(module, function, tensor shapes,
# keyword arguments), ...]}; every tensor in the build's dtype. The softmax twice: rows in one block
# and rows longer than the largest block (another constexpr, another kernel).
GPU_KERNELS_CALLS = {
    "gelu": [("gpu_kernels.elementwise", "gelu_triton", [[4096, 4096]], {})],
    "softmax": [("gpu_kernels.softmax", "softmax_triton", [[1024, 1000]], {}),
                ("gpu_kernels.softmax", "softmax_triton", [[1024, 16384]], {})],
    "matmul": [("gpu_kernels.matmul", "matmul_triton", [[4096, 4096], [4096, 4096], [4096]], {"activation": "gelu"}),
               ("gpu_kernels.matmul", "matmul_triton", [[4096, 4096], [4096, 4096]], {})],
}


def run_calls(calls: list, make, dtype: str) -> None:
    """Call each (module, function, shapes, kwargs) on fake tensors of those shapes in `dtype`."""
    import importlib

    for module, function, shapes, kwargs in calls:
        getattr(importlib.import_module(module), function)(*(make(*s, dtype=torch_dtype(dtype)) for s in shapes),
                                                           **kwargs)


def gpu_kernels_call(tree: str, dtype: str, kernels=tuple(GPU_KERNELS_CALLS)):
    """A call that runs tree's gpu_kernels entry points (GPU_KERNELS_CALLS, those of `kernels`) as on a GPU."""

    def call(make):
        from kernels import impl

        impl.activate(impl.resolve(tree, ROOT))
        run_calls([c for name in kernels for c in GPU_KERNELS_CALLS[name]], make, dtype)

    return call


# What `--assignment` chooses among the project's kernels ("demos": kernels/demos.py, the course's examples).
PARTS = ("gpu_kernels", "flash_attention", "demos")


def matrix(targets, dtypes, head_dims, all_configs: bool, tree: str = "solutions", parts=PARTS,
           skipped: list | None = None) -> list[Build]:
    """Every build of the project's kernels among `parts`, each from host code run as on that target's GPU
    (gpu_launches): FlashAttention causal (at every autotune config)
    and not causal (at the first: the same code as the causal kernels' unmasked loop), the demos, and
    gpu_kernels' GeLU, softmax and matmul (GPU_KERNELS_CALLS), each kernel apart. An entry point that
    raises NotImplementedError (a stub) is left out and named in `skipped`, so that a student's tree
    builds what is written so far; any other error is the student's to see, and is raised."""
    builds = []
    for dtype in dtypes:
        cases = []
        if "flash_attention" in parts:
            cases += [(f"{dtype} d {d} {'causal' if causal else 'full'}", flash_attention_call(tree, dtype, d, causal),
                       all_configs and causal, "flash_attention FlashAttentionTriton")
                      for d in head_dims for causal in (True, False)]
        if "demos" in parts:
            cases.append((f"{dtype}", demos_call(dtype), all_configs, "demos"))
        if "gpu_kernels" in parts:
            cases += [(f"{dtype} gpu_kernels", gpu_kernels_call(tree, dtype, [kernel]), all_configs, f"gpu_kernels {kernel}")
                      for kernel in GPU_KERNELS_CALLS]
        for label, call, every_config, what in cases:
            # A dry run per target: host code may choose by the GPU (its capability). Modules stay imported
            # from the first (the builds, run after, find kernels by module name), so what a module reads
            # when imported is the first target's; the grader's request imports anew per target.
            for target in targets:
                try:
                    launches = gpu_launches(call, target)
                except NotImplementedError as exc:
                    if skipped is not None and what not in [name for name, _ in skipped]:
                        skipped.append((what, str(exc).strip().splitlines()[0] if str(exc).strip() else "a stub"))
                    break
                for launch in unique_launches(launches):
                    builds += builds_for(launch, target, label, every_config)
    seen, kept = set(), []
    for b in builds:  # a kernel without the causal flag (the preprocess) appears in both cases: build once
        key = json.dumps([b.module, b.kernel, b.target, b.signature, b.constexprs, b.divisible, b.num_warps,
                          b.num_stages],
                         sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            kept.append(b)
    return kept


