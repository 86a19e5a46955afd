"""Time the gpu_kernels kernels against torch and against the roofline: GB/s, TFLOP/s and the wave cliff.

    python -m kernels.bench_kernels [--impl solutions|assignments|PATH] [--out DIR] [--quick]

(`make bench-kernels` runs it; `make bench-kernels BENCH_ARGS=--quick` passes flags.) It imports the
chosen tree's gelu_triton, softmax_triton and matmul_triton and times each beside torch's own operation
(F.gelu(x, approximate="tanh"), torch.softmax, torch.matmul) on the same inputs, after checking that the
two give the same result. Four tables: GeLU at three sizes, the row softmax at three shapes, the matmul
at three square sizes, and the wave sweep: m = 896, k = 4096, n from 2048 to 4864 in steps of 128.

Every row has the ideal FLOPs and HBM bytes, counted here by the handout's rules (gpu_kernels §5: each
input read once, each output written once; GeLU 20 FLOPs per element, softmax 5, a matmul 2·m·n·k),
the achieved GB/s and TFLOP/s (those counts over the measured time), the roofline's ideal time,
max(FLOPs / peak, bytes / HBM bandwidth), and the measured time over it. The peak is the tensor cores'
bf16 figure for the matmul and the CUDA cores' fp32 figure for GeLU and softmax (§5 "Two compute
roofs"), from kernels/hardware.py for the GPU found (H100 SXM figures for a GPU it does not describe,
and the title says so). The sweep adds the output tiles and waves of §6's model, 128 x 128 tiles on
the GPU's SMs. It writes DIR/bench_kernels.csv (one row per measurement, units in the column names) and
DIR/bench_kernels.png (GB/s and TFLOP/s against size, and the sweep with a line where each wave starts).

On a GPU: bf16, timed by kernels.bench (do_bench's median, the L2 cache flushed before each call). On
a CPU it refuses (exit 2) unless given --quick, which runs the same pipeline on tiny float32 inputs
under the Triton interpreter: its times are meaningless, it checks that the code runs. A kernel still
a stub gives "not implemented" rows; a kernel that raises or returns a wrong result gives a row saying
so, the other rows are still measured, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import importlib
import re
import sys
from pathlib import Path
from typing import Callable

import kernels  # noqa: F401  (select the interpreter before Triton is imported)
import torch
import torch.nn.functional as F
from kernels import course, impl
from kernels.bench import benchmark
from kernels.hardware import GPU, GPUS, gpu
from kernels.roofline import use_tree

ROOT = Path(__file__).resolve().parents[1]
# FLOPs per element, as the handout counts them (gpu_kernels §5).
GELU_FLOPS_PER_ELEMENT = 20
SOFTMAX_FLOPS_PER_ELEMENT = 5
# §6's model: one 128 x 128 output tile per SM at a time, every tile taking the same time.
TILE = 128
FALLBACK_GPU = "H100"
# Same chip as a board of hardware.py, other bandwidth, clocks or SM count: their figures would mislead.
OTHER_BOARDS = ("PCIE", "NVL", "40GB")
# The Triton result may differ from torch's by this fraction of torch's largest |value| (bf16 rounding).
RESULT_TOLERANCE = 1e-2
TABLES = ("gelu", "softmax", "matmul", "sweep")
KERNELS = {"gelu": ("elementwise", "gelu_triton"), "softmax": ("softmax", "softmax_triton"),
           "matmul": ("matmul", "matmul_triton")}
TORCH_OPS = {"gelu": lambda x: F.gelu(x, approximate="tanh"), "softmax": lambda x: torch.softmax(x, dim=-1),
             "matmul": torch.matmul}
CSV_COLUMNS = ("table", "implementation", "shape", "dtype", "device", "time_ms", "flops", "hbm_bytes",
               "achieved_GB_per_s", "achieved_TFLOP_per_s", "roofline_gpu", "peak_FLOP_per_s",
               "hbm_bandwidth_bytes_per_s", "ideal_time_ms", "bound", "measured_over_ideal",
               "tiles_128x128", "num_sms", "waves", "tile_efficiency", "note")
NO_GPU = ("kernels.bench_kernels times kernels on a CUDA GPU, and torch.cuda.is_available() is False here. "
          "Run it on a machine with an NVIDIA GPU (make bench-kernels), or add --quick to run the same "
          "pipeline under the Triton interpreter at tiny sizes: its times are meaningless there, it only "
          "checks that the code runs.")


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to run: the shapes of each table (GeLU: (numel,), softmax: (rows, cols), the matmuls:
    (m, n, k)), the dtype and device, and do_bench's budgets in milliseconds."""

    shapes: dict[str, tuple[tuple[int, ...], ...]]
    dtype: torch.dtype
    device: str
    warmup: float
    rep: float


def make_plan(device: str, quick: bool) -> Plan:
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    if quick:  # the interpreter runs each program in Python: only tiny sizes finish in seconds
        shapes = {"gelu": ((1024,),), "softmax": ((8, 64),), "matmul": ((32, 32, 32),),
                  "sweep": tuple((32, n, 32) for n in (32, 64, 96))}
        return Plan(shapes, dtype, device, warmup=1 if device == "cuda" else 0, rep=5 if device == "cuda" else 1)
    shapes = {"gelu": ((2**20,), (2**24,), (2**26,)),
              "softmax": ((8192, 1024), (4096, 4096), (2048, 16384)),
              "matmul": tuple((size, size, size) for size in (1024, 4096, 8192)),
              "sweep": tuple((896, n, 4096) for n in range(2048, 4864 + 1, 128))}
    return Plan(shapes, dtype, device, warmup=25, rep=100)


# ---- The counts (handout §5 and §6), done here: the tree's own cost.py may be a stub or wrong ----------

def gelu_counts(numel: int, element_bytes: int) -> tuple[int, int]:
    """(FLOPs, HBM bytes) of GeLU over numel elements: x read once, y written once."""
    return GELU_FLOPS_PER_ELEMENT * numel, 2 * numel * element_bytes


def softmax_counts(rows: int, cols: int, element_bytes: int) -> tuple[int, int]:
    """(FLOPs, HBM bytes) of a row softmax of a (rows, cols) matrix read once and written once."""
    return SOFTMAX_FLOPS_PER_ELEMENT * rows * cols, 2 * rows * cols * element_bytes


def matmul_counts(m: int, n: int, k: int, element_bytes: int) -> tuple[int, int]:
    """(FLOPs, HBM bytes) of C = A @ B, A (m, k), B (k, n): 2·m·n·k FLOPs; A, B and C moved once each."""
    return 2 * m * n * k, (m * k + k * n + m * n) * element_bytes


def counts(table: str, shape: tuple[int, ...], element_bytes: int) -> tuple[int, int]:
    count = {"gelu": gelu_counts, "softmax": softmax_counts, "matmul": matmul_counts, "sweep": matmul_counts}
    return count[table](*shape, element_bytes)


def output_tiles(m: int, n: int, tile: int = TILE) -> int:
    """Output tiles of an (m, n) result in tile x tile blocks, the partial ones at the edges included."""
    return -(-m // tile) * -(-n // tile)


def wave_count(m: int, n: int, num_sms: int, tile: int = TILE) -> int:
    """Rounds of at most one tile per SM that run all of an (m, n) result's tiles."""
    return -(-output_tiles(m, n, tile) // num_sms)


def wave_boundaries(m: int, ns: list[int], num_sms: int) -> list[tuple[int, int]]:
    """(n before, n after) for each pair of neighbouring n whose outputs take a different number of waves."""
    ns = sorted(ns)
    return [(a, b) for a, b in zip(ns, ns[1:]) if wave_count(m, a, num_sms) != wave_count(m, b, num_sms)]


# ---- The roofline's figures ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Roof:
    """The figures the ideal times use: hardware.py's GPU, the SMs of the waves, and where they came from."""

    gpu: GPU
    num_sms: int
    label: str


def known_gpu(device_name: str) -> GPU | None:
    """hardware.py's GPU for a name torch.cuda.get_device_name() gives ("NVIDIA H100 80GB HBM3"), or None."""
    words = re.split(r"[\s_-]+", device_name.upper())
    if any(board in words for board in OTHER_BOARDS):
        return None
    return next((g for g in GPUS if g.name.split()[0].upper() in words), None)


def roofline_figures(device: str) -> Roof:
    """The figures for this device: the GPU's own entry and SM count, else H100 SXM figures, saying so."""
    fallback = gpu(FALLBACK_GPU)
    if device != "cuda":
        return Roof(fallback, fallback.num_sms, f"{fallback.name} figures (no GPU here)")
    name = torch.cuda.get_device_name()
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    found = known_gpu(name)
    if found is None:
        return Roof(fallback, sms, f"{fallback.name} figures: kernels/hardware.py has none for {name}")
    return Roof(found, sms, f"{found.name} figures for {name}")


def peak_of(table: str, roof: Roof) -> float:
    """The matmuls run on the tensor cores (bf16 peak); GeLU and softmax on the CUDA cores (fp32 peak)."""
    return roof.gpu.peak_flops_per_sec("bf16" if table in ("matmul", "sweep") else "fp32")


# ---- Measuring --------------------------------------------------------------------------------------

def load_kernels(choice: str | None) -> tuple[Path, dict[str, Callable | Exception]]:
    """Put the chosen tree (default: solutions here, assignments in the student release) on sys.path and
    import its three kernels; a module that fails to import is kept as its exception, so that its rows say
    why and the others are still measured."""
    tree = use_tree(choice)
    found: dict[str, Callable | Exception] = {}
    for kernel, (module, name) in KERNELS.items():
        try:
            found[kernel] = getattr(importlib.import_module(f"gpu_kernels.{module}"), name)
        except Exception as exc:  # a broken module must not hide the other kernels' rows
            found[kernel] = exc
    return tree, found


def make_inputs(table: str, shape: tuple[int, ...], plan: Plan) -> list[torch.Tensor]:
    gen = torch.Generator(device=plan.device).manual_seed(0)
    if table in ("matmul", "sweep"):
        m, n, k = shape
        sizes = [(m, k), (k, n)]
    else:
        sizes = [shape]
    return [torch.randn(size, generator=gen, device=plan.device, dtype=plan.dtype) for size in sizes]


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:100] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def result_problem(out: object, expected: torch.Tensor) -> str:
    """'' when out is torch's result within RESULT_TOLERANCE of its largest |value|; else what is wrong."""
    if not isinstance(out, torch.Tensor) or out.shape != expected.shape or out.dtype != expected.dtype:
        got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
        return f"wrong result: got {got}, torch gives {tuple(expected.shape)} {expected.dtype}"
    error = (out.float() - expected.float()).abs().max().item()
    scale = max(expected.float().abs().max().item(), 1e-30)
    if not error <= RESULT_TOLERANCE * scale:  # NaN fails too
        return f"wrong result: max |difference| from torch {error:.3g}, its largest |value| {scale:.3g}"
    return ""


def time_call(fn: Callable | Exception, args: list, expected: torch.Tensor | None, plan: Plan) -> tuple:
    """(milliseconds or None, note): the call checked against torch's result first (which also compiles
    it), then timed. None with the reason when it is a stub, raises or gives a wrong result."""
    if isinstance(fn, Exception):
        return None, f"error: importing it failed: {_first_line(fn)}"
    try:
        out = fn(*args)
        problem = "" if expected is None else result_problem(out, expected)
        if problem:
            return None, f"{problem}; not timed"
        return benchmark(lambda: fn(*args), warmup=plan.warmup, rep=plan.rep, device=plan.device), ""
    except NotImplementedError:
        return None, "not implemented"
    except torch.cuda.OutOfMemoryError:
        return None, "out of memory"
    except Exception as exc:  # one failing row must not hide the others: say what happened and go on
        return None, f"error: {_first_line(exc)}"


def derived(ms: float | None, flops: int, nbytes: int, peak: float, bandwidth: float) -> dict:
    """The roofline's ideal time and which roof sets it; with a time, the achieved rates and the ratio."""
    compute_s, memory_s = flops / peak, nbytes / bandwidth
    ideal_s = max(compute_s, memory_s)
    row = dict(ideal_time_ms=ideal_s * 1e3, bound="compute" if compute_s >= memory_s else "memory")
    if ms is not None:
        seconds = ms / 1e3
        row |= dict(achieved_GB_per_s=nbytes / seconds / 1e9, achieved_TFLOP_per_s=flops / seconds / 1e12,
                    measured_over_ideal=seconds / ideal_s)
    return row


def measure_shape(table: str, shape: tuple[int, ...], found: dict, plan: Plan, roof: Roof) -> list[dict]:
    """The two rows of one shape: the tree's Triton kernel, then torch's operation, on the same inputs."""
    kernel = "matmul" if table == "sweep" else table
    flops, nbytes = counts(table, shape, plan.dtype.itemsize)
    peak, bandwidth = peak_of(table, roof), roof.gpu.hbm_bandwidth_bytes_per_sec
    base = dict(table=table, shape="x".join(map(str, shape)), dtype=str(plan.dtype).removeprefix("torch."),
                device=plan.device, flops=flops, hbm_bytes=nbytes, roofline_gpu=roof.gpu.name,
                peak_FLOP_per_s=peak, hbm_bandwidth_bytes_per_s=bandwidth)
    if table == "sweep":
        m, n, _ = shape
        tiles, waves = output_tiles(m, n), wave_count(m, n, roof.num_sms)
        base |= dict(tiles_128x128=tiles, num_sms=roof.num_sms, waves=waves,
                     tile_efficiency=m * n / (waves * roof.num_sms * TILE * TILE))
    try:
        args = make_inputs(table, shape, plan)
        expected = TORCH_OPS[kernel](*args)
    except torch.cuda.OutOfMemoryError:
        return [base | dict(implementation=name, note="out of memory") for name in ("triton", "torch")]
    rows = []
    for name, fn, check in (("triton", found[kernel], expected), ("torch", TORCH_OPS[kernel], None)):
        ms, note = time_call(fn, args, check, plan)
        rows.append(base | dict(implementation=name, time_ms=ms, note=note)
                    | derived(ms, flops, nbytes, peak, bandwidth))
    return rows


def run_plan(plan: Plan, found: dict, roof: Roof) -> list[dict]:
    return [row for table in TABLES for shape in plan.shapes[table]
            for row in measure_shape(table, shape, found, plan, roof)]


def failed(row: dict) -> bool:
    """A row whose kernel raised (other than the stub's NotImplementedError) or gave a wrong result."""
    return row["note"].startswith(("error", "wrong result"))


# ---- Reporting ----------------------------------------------------------------------------------------

def write_csv(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({column: "" if row.get(column) is None else row[column] for column in CSV_COLUMNS})


def figure_title(tree: str) -> str:
    """The plot's title begins with the assignment, by its number in the course (kernels/course.py)."""
    return f"Assignment {course.number('gpu_kernels')}, gpu_kernels ({tree})"


def titles(plan: Plan, roof: Roof, tree: Path) -> dict[str, str]:
    gpu_ = roof.gpu
    where = (f"{str(plan.dtype).removeprefix('torch.')}, {plan.device} ({tree.name}); roofline: {roof.label}"
             + ("; times under the Triton interpreter are meaningless" if plan.device == "cpu" else ""))
    hbm = f"HBM {gpu_.hbm_bandwidth_bytes_per_sec:.3g} B/s"
    sweep = plan.shapes["sweep"]
    return {
        "gelu": f"GeLU (tanh), shape = elements, {where}; {hbm}, CUDA-core fp32 peak {gpu_.fp32_flops_per_sec:.3g}",
        "softmax": f"row softmax, shape = rows x cols, {where}; {hbm}, CUDA-core fp32 peak "
                   f"{gpu_.fp32_flops_per_sec:.3g}",
        "matmul": f"matmul, shape = m x n x k, {where}; {hbm}, tensor-core bf16 peak {gpu_.bf16_flops_per_sec:.4g}",
        "sweep": f"wave sweep, shape = m x n x k, m {sweep[0][0]}, k {sweep[0][2]}, n {sweep[0][1]} to "
                 f"{sweep[-1][1]}: tiles and waves for {TILE} x {TILE} output tiles on {roof.num_sms} SMs; {where}; "
                 f"{hbm}, tensor-core bf16 peak {gpu_.bf16_flops_per_sec:.4g}",
    }


def _fmt(value: float | int | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_tables(rows: list[dict], titles_: dict[str, str]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=170)
    columns = (("implementation", "implementation", "s"), ("shape", "shape", "s"), ("ms", "time_ms", ".4g"),
               ("FLOPs", "flops", ".3g"), ("bytes", "hbm_bytes", ".3g"), ("GB/s", "achieved_GB_per_s", ".4g"),
               ("TFLOP/s", "achieved_TFLOP_per_s", ".4g"), ("ideal ms", "ideal_time_ms", ".4g"),
               ("bound", "bound", "s"), ("measured/ideal", "measured_over_ideal", ".3g"))
    sweep_columns = (("tiles", "tiles_128x128", "d"), ("waves", "waves", "d"), ("tile eff.", "tile_efficiency", ".3g"))
    for table_name in TABLES:
        table = Table(title=titles_[table_name], title_justify="left")
        chosen = columns + (sweep_columns if table_name == "sweep" else ()) + (("note", "note", "s"),)
        for header, _, spec in chosen:
            table.add_column(header, justify="left" if spec == "s" else "right")
        for row in (r for r in rows if r["table"] == table_name):
            table.add_row(*(_fmt(row.get(key), spec) for _, key, spec in chosen))
        console.print(table)


def _series(ax, rows: list[dict], key: str, roof_value: float, roof_label: str, title: str) -> None:
    """One panel: `key` for each shape of the table (in order), a line per implementation, the roof dashed."""
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    for name in ("triton", "torch"):
        points = [(shapes.index(r["shape"]), r[key]) for r in rows if r["implementation"] == name and r.get(key)]
        if points:
            ax.plot(*zip(*points), marker="o", label=name)
    ax.axhline(roof_value, linestyle="--", color="gray", label=roof_label)
    ax.set_xticks(range(len(shapes)), shapes, fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)


def _sweep_panel(ax, rows: list[dict], peak: float) -> None:
    for name in ("triton", "torch"):
        points = [(int(r["shape"].split("x")[1]), r["achieved_TFLOP_per_s"]) for r in rows
                  if r["implementation"] == name and r.get("achieved_TFLOP_per_s")]
        if points:
            ax.plot(*zip(*points), marker="o", label=name)
    m, num_sms = int(rows[0]["shape"].split("x")[0]), rows[0]["num_sms"]
    ns = sorted({int(r["shape"].split("x")[1]) for r in rows})
    for before, after in wave_boundaries(m, ns, num_sms):
        ax.axvline((before + after) / 2, color="red", linestyle=":", alpha=0.7)
        ax.text((before + after) / 2, 0.02, f" wave {wave_count(m, after, num_sms)}", color="red", fontsize=7,
                transform=ax.get_xaxis_transform())
    ax.axhline(peak / 1e12, linestyle="--", color="gray", label="tensor-core peak")
    ax.set_xlabel("n")
    ax.set_title(f"wave sweep (m {m}): TFLOP/s, {TILE} x {TILE} tiles on {num_sms} SMs", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)


def plot(rows: list[dict], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 8))
    of = {name: [r for r in rows if r["table"] == name] for name in TABLES}
    bandwidth = rows[0]["hbm_bandwidth_bytes_per_s"] / 1e9
    _series(axes[0][0], of["gelu"], "achieved_GB_per_s", bandwidth, "HBM bandwidth", "GeLU: GB/s against elements")
    _series(axes[0][1], of["softmax"], "achieved_GB_per_s", bandwidth, "HBM bandwidth",
            "softmax: GB/s against rows x cols")
    _series(axes[1][0], of["matmul"], "achieved_TFLOP_per_s", of["matmul"][0]["peak_FLOP_per_s"] / 1e12,
            "tensor-core peak", "matmul: TFLOP/s against m x n x k")
    _sweep_panel(axes[1][1], of["sweep"], of["sweep"][0]["peak_FLOP_per_s"])
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench_kernels", help="folder for the CSV and PNG")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, in seconds (on a CPU: under the Triton "
                        "interpreter, the times meaningless)")
    parser.add_argument("--impl", default=None, help="implementation tree: solutions, assignments or PATH (default: "
                        "solutions, or assignments where there is no solutions/)")
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.quick:
        print(NO_GPU, file=sys.stderr)
        return 2
    try:
        tree, found = load_kernels(args.impl)
    except impl.ImplError as exc:
        parser.error(str(exc))
    plan, roof = make_plan(device, args.quick), roofline_figures(device)
    rows = run_plan(plan, found, roof)
    print_tables(rows, titles(plan, roof, tree))
    write_csv(rows, args.out / "bench_kernels.csv")
    plot(rows, args.out / "bench_kernels.png", f"{figure_title(tree.name)}, {plan.device}; roofline: {roof.label}")
    print(f"wrote {args.out / 'bench_kernels.csv'} and {args.out / 'bench_kernels.png'}")
    failures = [f"{r['table']} {r['shape']}" for r in rows if failed(r)]
    if failures:
        print(f"{len(failures)} kernel rows failed (see their note): {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
