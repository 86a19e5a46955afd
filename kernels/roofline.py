"""The roofline of the H100 and the H200, with the lecture's operations placed on it.

    python -m kernels.roofline --out build/roofline.png [--impl solutions|assignments|PATH]

The attainable FLOP/s come from the implementation tree's own `resource_accounting.flops.
attainable_flops_per_sec` (handout §4): in the student release, `make roofline` draws the roofline
with your function (and says so while it still raises NotImplementedError). The kernels of the
gpu_kernels assignment join the plot (square markers) once the tree's `gpu_kernels/cost.py` counts them
(its handout, §5); until then the plot leaves them out and says why. The title names that assignment by
its number in the course (kernels/course.py).

A kernel doing F FLOPs while moving B bytes between HBM and the chip has arithmetic intensity I = F / B
(FLOP/byte). It can run no faster than the compute peak, nor than bandwidth × I FLOP/s:
attainable = min(peak, I × bandwidth). The two limits meet at the ridge point peak / bandwidth.

Each operation's FLOPs and bytes come from a formula below (bf16: 2 bytes per element; every input is
read once from HBM and every output written once), so the intensities are derived, not typed in:
ReLU 0.25, GeLU 5, dot product ≈ 0.5, matrix-vector ≈ 1 (all memory-bound), a 1024³ matmul ≈ 341
(compute-bound), as in the lecture.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from kernels import course, impl
from kernels.hardware import GPU, gpu

BF16_BYTES = 2
PLOTTED_GPUS = ("H100 SXM", "H200 SXM")
GELU_FLOPS_PER_ELEMENT = 20  # the lecture's count for the tanh approximation


@dataclass(frozen=True)
class Op:
    """An operation's work and traffic: FLOPs done and bytes read plus written in HBM."""

    name: str
    flops: float
    bytes_moved: float

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes_moved


def elementwise(name: str, flops_per_element: float, n: int, bytes_per_element: float) -> Op:
    """n elements in, n elements out."""
    return Op(name, flops_per_element * n, 2 * n * bytes_per_element)


def dot_product(n: int, bytes_per_element: float) -> Op:
    """x·y of two n-vectors: n multiplies and n adds; reads 2n elements, writes one."""
    return Op("dot product", 2 * n, (2 * n + 1) * bytes_per_element)


def matrix_vector(n: int, bytes_per_element: float) -> Op:
    """An (n, n) matrix times an n-vector: 2n² FLOPs; reads n² + n elements, writes n."""
    return Op("matrix-vector", 2 * n * n, (n * n + 2 * n) * bytes_per_element)


def matmul(m: int, n: int, p: int, bytes_per_element: float) -> Op:
    """(m, n) @ (n, p): 2mnp FLOPs; reads mn + np elements, writes mp."""
    return Op(f"{m}x{n}x{p} matmul", 2 * m * n * p, (m * n + n * p + m * p) * bytes_per_element)


def lecture_ops(n: int = 1024, bytes_per_element: float = BF16_BYTES) -> tuple[Op, ...]:
    """The lecture's five operations at size n, in bf16 by default."""
    return (
        elementwise("ReLU", 1, n, bytes_per_element),
        elementwise("GeLU", GELU_FLOPS_PER_ELEMENT, n, bytes_per_element),
        dot_product(n, bytes_per_element),
        matrix_vector(n, bytes_per_element),
        matmul(n, n, n, bytes_per_element),
    )


# The gpu_kernels assignment's kernels as the plot shows them, in bf16: (label, cost function, its arguments).
KERNEL_SHAPES = (
    ("gelu_triton", "elementwise_cost", (2**24,), {}),
    ("softmax_triton", "softmax_cost", (4096, 4096), {}),
    ("matmul+bias+GeLU fused", "matmul_cost", (4096, 4096, 1024), {"bias": True, "activation": "gelu"}),
)


# Who the square markers belong to, and the plot's title: the assignment's number comes from the course table.
KERNELS = f"the kernels of Assignment {course.number('gpu_kernels')} (gpu_kernels)"
TITLE = f"Roofline in bf16: the lecture's operations (circles) and {KERNELS} (squares)"


def kernel_ops() -> tuple[tuple[Op, ...], str]:
    """The gpu_kernels assignment's kernels counted by the tree's gpu_kernels.cost, and the unfused matmul + bias + GeLU
    (the fused kernel's FLOPs, its bytes plus fusion_savings); or no op and the reason when the tree's
    cost functions are missing or not written yet."""
    import torch

    try:
        from gpu_kernels import cost

        ops = []
        for label, function, args, kwargs in KERNEL_SHAPES:
            flops, moved = getattr(cost, function)(*args, torch.bfloat16, **kwargs)
            ops.append(Op(label, flops, moved))
        fused = ops[-1]
        extra = cost.fusion_savings(*KERNEL_SHAPES[-1][2], torch.bfloat16)
        ops.append(Op("unfused (3 kernels)", fused.flops, fused.bytes_moved + extra))
    except (ImportError, AttributeError) as exc:
        return (), f"gpu_kernels/cost.py is missing or incomplete ({exc})"
    except NotImplementedError as exc:
        return (), f"gpu_kernels/cost.py is not written yet ({exc})"
    return tuple(ops), ""


def attainable(device: GPU, intensity: float) -> float:
    """The roofline in bf16 at `intensity`, by the implementation tree's §4 function."""
    from resource_accounting.flops import attainable_flops_per_sec

    return attainable_flops_per_sec(intensity, device.bf16_flops_per_sec, device.hbm_bandwidth_bytes_per_sec)


def use_tree(choice: str | None) -> Path:
    """Put the chosen implementation tree (default: solutions here, assignments in the release) on sys.path."""
    root = Path(__file__).resolve().parents[1]
    default = "solutions" if (root / "solutions").is_dir() else "assignments"
    tree = impl.resolve(impl.choose(choice, default), root)
    impl.activate(tree)
    return tree


@dataclass(frozen=True)
class PlacedOp:
    """Where one operation sits on one GPU's roofline."""

    op: str
    gpu: str
    intensity: float
    attainable_flops_per_sec: float
    compute_bound: bool


def placed_points(gpus: tuple[str, ...] = PLOTTED_GPUS, ops: tuple[Op, ...] | None = None) -> list[PlacedOp]:
    """Every (GPU, op) pair the plot marks, with the op's intensity and attainable FLOP/s."""
    ops = lecture_ops() if ops is None else ops
    points = []
    for device in map(gpu, gpus):
        for op in ops:
            points.append(PlacedOp(op.name, device.name, op.intensity, attainable(device, op.intensity),
                                   op.intensity >= device.ridge_point()))
    return points


def plot(out: Path, gpus: tuple[str, ...] = PLOTTED_GPUS) -> Path:
    """Write the log-log roofline PNG to `out` (its folder is created) and return the path."""
    fig = Figure(figsize=(9, 6), dpi=100)
    ax = fig.add_subplot()
    intensities = np.logspace(-2, 4, 400)
    points = placed_points(gpus)
    for device, color in zip(map(gpu, gpus), ("tab:blue", "tab:orange")):
        ax.plot(intensities, [attainable(device, float(i)) for i in intensities], color=color,
                label=f"{device.name}: ridge {device.ridge_point():.0f} FLOP/byte")
        ax.axvline(device.ridge_point(), color=color, linestyle=":", linewidth=1)
        mine = [p for p in points if p.gpu == device.name]
        ax.scatter([p.intensity for p in mine], [p.attainable_flops_per_sec for p in mine], color=color, zorder=3)
    # Label each op once, beside its point on the first GPU's roofline.
    for p in (p for p in points if p.gpu == gpu(gpus[0]).name):
        ax.annotate(f"{p.op} ({p.intensity:.3g})", (p.intensity, p.attainable_flops_per_sec),
                    textcoords="offset points", xytext=(6, -14), fontsize=9)
    kernels, _ = kernel_ops()
    for device, color in zip(map(gpu, gpus), ("tab:blue", "tab:orange")):
        mine = placed_points((device.name,), kernels) if kernels else []
        ax.scatter([p.intensity for p in mine], [p.attainable_flops_per_sec for p in mine], color=color,
                   marker="s", zorder=3)
    for p in placed_points((gpus[0],), kernels) if kernels else []:
        ax.annotate(f"{p.op} ({p.intensity:.3g})", (p.intensity, p.attainable_flops_per_sec),
                    textcoords="offset points", xytext=(-6, 6), ha="right", fontsize=8, color="dimgray")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte)",
           ylabel="attainable FLOP/s (bf16, dense)", title=TITLE)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Plot the H100 and H200 rooflines with the lecture's ops.")
    parser.add_argument("--out", type=Path, default=Path("build/roofline.png"), help="PNG to write")
    parser.add_argument("--impl", default=None, help="implementation tree: solutions, assignments or PATH")
    args = parser.parse_args(argv)
    try:
        tree = use_tree(args.impl)
        print(f"wrote {plot(args.out)}")
        skipped = kernel_ops()[1]
        if skipped:
            print(f"{KERNELS[0].upper()}{KERNELS[1:]} are not on the plot: {skipped}; write it (its handout, §5) "
                  "to see them")
    except impl.ImplError as exc:
        parser.error(str(exc))
    except NotImplementedError as exc:
        print(f"the roofline uses attainable_flops_per_sec from {tree}/resource_accounting/flops.py, which is not "
              f"written yet ({exc}); write it (handout §4), then run this again", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
