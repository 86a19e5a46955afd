"""The gpu_kernels handout's numeric keys (§8) and worked figures (§5 to §8), recomputed.

Every key `T<n>.<x> = value` in the handout's solution blocks is computed here from the reference
cost functions (solutions/gpu_kernels/cost.py, loaded from its file so that the test does not depend
on which implementation tree is active), the hardware table and the source figures below; the key
must be the computed value rounded to the digits it shows. The figures of the worked examples must
appear in the handout as computed. Each question's parts and rubric must add up to its points.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from pathlib import Path

import pytest
import torch

from kernels.hardware import gpu
from tests.tooling import reference_cost

ROOT = Path(__file__).resolve().parents[2]
HANDOUT = (ROOT / "solutions" / "gpu_kernels" / "README.md").read_text()
BF16 = torch.bfloat16

# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" (8.0, 9.0, 10.0): at most
# 64 resident warps and 2048 resident threads per SM; 32 threads per warp. NVIDIA H100 architecture
# whitepaper: up to 228 KB of shared memory per SM; 4 tensor cores per SM.
WARPS_PER_SM, THREADS_PER_SM, WARP = 64, 2048, 32
SHARED_PER_SM = 228 * 1024
SHARED_PER_BLOCK_SM90 = 227 * 1024  # the same table: shared memory per thread block, 9.0
SHARED_BYTES_PER_CLOCK, CLOCK = 32 * 4, 1.83e9  # the handout's assumption for T3
TENSOR_CORES_PER_SM, DENSE_BF16_FLOP_PER_CLOCK = 4, 1024
SYSTOLIC = 128
# The same table: 64K 32-bit registers per SM (9.0); and 1 KB of shared memory per thread block reserved by the
# system (the CUDA C++ Best Practices Guide's occupancy section, sm_80 and later).
REGISTERS_PER_SM, RESERVED_SHARED_PER_BLOCK = 65536, 1024
# T10: the staff's run of `make bench-kernels` on the reference (one H100), shipped to students, and the reference's
# plain matmul kernel as its sm_90 build reports it (registers per thread, shared bytes, threads) with the Triton the
# lock files pin (test_the_handouts_registers_are_the_locked_tritons_build builds it again). The staff's run used the
# course image's Triton 3.6, whose build of the plain kernel takes 116 registers (`make gpu-validate`'s agreement
# step found that figure after a real launch): the same programs per SM.
MEASURED = ROOT / "solutions" / "gpu_kernels" / "measured" / "h100_bench_kernels.csv"
PLAIN_MATMUL = dict(registers=112, shared=96 * 1024, threads=256)
FUSED_MATMUL_REGISTERS = 144
STAFF_PLAIN_REGISTERS = 116
# The same kernels built at 4 warps (128 threads): T9's model answer says what that costs.
FOUR_WARPS_REGISTERS = dict(plain=210, fused=255)


C = reference_cost.load()


def pad(size: int) -> int:
    return -(-size // SYSTOLIC) * SYSTOLIC


def computed_keys() -> dict[str, float]:
    a100, h100, h200, b200 = (gpu(name) for name in ("A100", "H100", "H200", "B200"))
    two_waves = max(cols * 128 for cols in range(1, 200) if C.waves(1400, cols * 128, 128, 128, h100.num_sms) == 2)
    stage = (128 + 128) * 64 * 2  # one pipeline stage of 128 x 64 and 64 x 128 bf16 tiles (T9's model)
    m = n = k = 4096
    rows = measured()
    per_sm = programs_per_sm(**PLAIN_MATMUL)
    sweep = sorted(int(shape.split("x")[1]) for (table, impl, shape) in rows if table == "sweep" and impl == "triton")
    cliff = next(n for n in sweep if C.tiles(896, n, 128, 128) > per_sm * h100.num_sms)
    previous = sweep[sweep.index(cliff) - 1]
    split_k = max(s for s in range(1, 64) if s * C.tiles(16, 4096, 128, 128) <= h100.num_sms)  # T12: one wave
    return {
        "T1.a": a100.ridge_point(), "T1.b": h100.ridge_point(), "T1.c": h200.ridge_point(), "T1.d": b200.ridge_point(),
        "T1.e": b200.ridge_point() / a100.ridge_point(),
        "T2.a": h100.num_sms * WARPS_PER_SM, "T2.b": h100.num_sms * THREADS_PER_SM, "T2.c": THREADS_PER_SM // (4 * WARP),
        "T3.a": h100.num_sms * SHARED_BYTES_PER_CLOCK * CLOCK,
        "T3.b": h100.num_sms * SHARED_BYTES_PER_CLOCK * CLOCK / h100.hbm_bandwidth_bytes_per_sec,
        "T3.c": h100.num_sms * SHARED_PER_SM, "T3.d": h100.hbm_bytes / (h100.num_sms * SHARED_PER_SM),
        "T4.a": 2 * 200 * pad(300) * pad(130), "T4.b": 2 * 200 * 300 * 130 / (2 * 200 * pad(300) * pad(130)),
        "T4.c": pad(1000),
        "T5.a": C.tiles(1400, 1600, 128, 128), "T5.b": C.waves(1400, 1600, 128, 128, h100.num_sms),
        "T5.c": C.tile_efficiency(1400, 1600, 128, 128, h100.num_sms), "T5.d": C.waves(1400, 1600, 128, 128, b200.num_sms),
        "T5.e": two_waves, "T5.f": two_waves / 1600,
        "T6.a": 10 + 30, "T6.b": (8 * 10 + 24 * 30) / (WARP * (10 + 30)),
        "T7.a": 2 * m * n * k * 2 + m * n * 2,
        "T7.b": C.tiles(m, n, 128, 128) * (128 * k + k * 128) * 2 + m * n * 2,
        "T9.a": 4 * stage, "T9.b": SHARED_PER_BLOCK_SM90 // stage,
        "T10.a": rows["gelu", "triton", "67108864"]["achieved_GB_per_s"] * 1e9 / h100.hbm_bandwidth_bytes_per_sec,
        "T10.b": rows["matmul", "triton", "4096x4096x4096"]["achieved_TFLOP_per_s"] * 1e12 / h100.bf16_flops_per_sec,
        "T10.c": 1.5 * rows["softmax", "triton", "2048x16384"]["achieved_GB_per_s"] * 1e9 / h100.hbm_bandwidth_bytes_per_sec,
        "T10.d": per_sm, "T10.e": cliff,
        "T10.f": rows["sweep", "triton", f"896x{cliff}x4096"]["time_ms"] / rows["sweep", "triton", f"896x{previous}x4096"]["time_ms"],
        "T11.a": torch.finfo(torch.float8_e4m3fn).max, "T11.b": torch.finfo(torch.float8_e5m2).max,
        "T11.c": h100.ridge_point("fp8"),
        # 2n³ FLOPs over n² + n² fp8 bytes and 2n² bf16 bytes: n / 2 FLOP/byte
        "T11.d": next(n for n in range(1, 10**5) if 2 * n**3 / (4 * n**2) >= h100.ridge_point("fp8")),
        "T12.a": C.tiles(16, 4096, 128, 128), "T12.b": C.tiles(16, 4096, 128, 128) / h100.num_sms,
        "T12.c": split_k, "T12.d": 2 * split_k * 16 * 4096 * 4,
    }


def measured() -> dict[tuple[str, str, str], dict[str, float]]:
    """The staff's table: (table, implementation, shape) -> its numeric columns."""
    import csv

    with open(MEASURED, newline="") as f:
        return {(r["table"], r["implementation"], r["shape"]): {k: float(r[k]) for k in ("time_ms", "achieved_GB_per_s",
                                                                                        "achieved_TFLOP_per_s")}
                for r in csv.DictReader(f)}


def programs_per_sm(registers: int, shared: int, threads: int) -> int:
    """Thread blocks of a kernel one H100 SM holds at once: the fewest its registers, its shared memory (with the
    block's reserved KB) and its threads allow."""
    return min(REGISTERS_PER_SM // (registers * threads), SHARED_PER_SM // (shared + RESERVED_SHARED_PER_BLOCK),
               THREADS_PER_SM // threads)


def test_the_staff_table_is_the_reference_timed_on_an_h100_and_shows_the_cliff_t10_explains():
    """The shipped CSV is a whole bench_kernels run (every table, triton and torch rows) on cuda, with the H100's
    roofline; its sweep's cliff is where two programs per SM put it, not where one would (T10's argument),
    and the fused kernel's registers allow one program per SM (T10's rubric)."""
    rows, h100 = measured(), gpu("H100")
    assert {(t, i) for t, i, _ in rows} == {(t, i) for t in ("gelu", "softmax", "matmul", "sweep")
                                            for i in ("triton", "torch")}
    with open(MEASURED) as f:
        text = f.read()
    assert ",cuda," in text and "H100 SXM" in text and ",cpu," not in text
    time = {int(s.split("x")[1]): v["time_ms"] for (t, i, s), v in rows.items() if t == "sweep" and i == "triton"}
    steps = {n: time[n] / time[p] for p, n in zip(sorted(time), sorted(time)[1:])}
    assert max(steps, key=steps.get) == computed_keys()["T10.e"] and steps[computed_keys()["T10.e"]] > 1.4
    one_per_sm = next(n for n in sorted(time) if C.tiles(896, n, 128, 128) > h100.num_sms)
    assert steps[one_per_sm] < 1.15, "no cliff where one program per SM would put it"
    assert programs_per_sm(FUSED_MATMUL_REGISTERS, PLAIN_MATMUL["shared"], PLAIN_MATMUL["threads"]) == 1
    assert programs_per_sm(STAFF_PLAIN_REGISTERS, PLAIN_MATMUL["shared"], PLAIN_MATMUL["threads"]) == \
        programs_per_sm(**PLAIN_MATMUL)


def handout_keys() -> dict[str, str]:
    blocks = re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", HANDOUT, re.S)
    return dict(re.findall(r"^(T\d+\.[a-z]) = (\S+)$", "".join(blocks), re.M))


def test_every_key_is_its_computation_rounded_to_the_digits_shown():
    """Each key equals the computed value: exactly for the parts graded exactly, else rounded to the digits it
    shows (within half a unit of its last digit)."""
    written, expected = handout_keys(), computed_keys()
    tolerance = dict(re.findall(r"^- \*\*(T\d+\.[a-z])\*\* \*\([\d.]+ points?, (exact|±[\d.]+%?)\)\*", HANDOUT, re.M))
    assert sorted(written) == sorted(expected) == sorted(tolerance)
    for part, text in written.items():
        value = Decimal(text.replace(",", "").replace("_", ""))
        if tolerance[part] == "exact":
            assert value == int(expected[part]), f"{part} = {text}, computed {expected[part]}"
        else:
            unit = Decimal(10) ** value.as_tuple().exponent
            assert abs(float(value) - expected[part]) <= float(unit) / 2 * (1 + 1e-9), \
                f"{part} = {text} is not {expected[part]!r} rounded to the digits shown"


def test_the_clock_assumed_in_t3_reproduces_the_h100_peak():
    """1.83 GHz × 132 SMs × 4 tensor cores × 1024 FLOP per clock is the datasheet's 989.4e12 (within 0.1%)."""
    h100 = gpu("H100")
    peak = CLOCK * h100.num_sms * TENSOR_CORES_PER_SM * DENSE_BF16_FLOP_PER_CLOCK
    assert peak == pytest.approx(h100.bf16_flops_per_sec, rel=1e-3)


def questions() -> dict[str, str]:
    section = HANDOUT.split("## §8", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"^(?=\*\*T\d+\.\*\* )", section, flags=re.M)[1:]
    return {re.match(r"\*\*(T\d+)\.", part).group(1): part for part in parts}


def test_each_questions_parts_and_rubric_add_up_to_its_points():
    """The header's points are the numeric parts' plus the rubric's; the rubric's criteria add up to it;
    each numeric part has a tolerance of the fixed format."""
    found = questions()
    assert list(found) == [f"T{i}" for i in range(1, 13)]
    for name, text in found.items():
        total = float(re.match(r"\*\*T\d+\.\*\* \*\((\d+(?:\.\d+)?) points?\)\*", text).group(1))
        parts = re.findall(rf"^- \*\*{name}\.[a-z]\*\* \*\((\d+(?:\.\d+)?) points?, (exact|±\d+(?:\.\d+)?%?)\)\*: ",
                           text, re.M)
        rubric = re.search(r"^\*Rubric \((\d+(?:\.\d+)?) points?\):\*$", text, re.M)
        criteria = re.findall(r"^- \*\((\d+(?:\.\d+)?)\)\* ", text, re.M)
        by_hand = float(rubric.group(1)) if rubric else 0.0
        assert math.isclose(sum(float(p) for p, _ in parts) + by_hand, total), name
        assert math.isclose(sum(map(float, criteria)), by_hand), name
        assert len(parts) == len(re.findall(rf"^{name}\.[a-z] = ", text, re.M)), f"{name}: a part without a key"


def commas(value: float) -> str:
    return f"{int(value):,}"


def panels(wave: int, tiles_m: int, tiles_n: int, group_m: int | None) -> tuple[int, int]:
    """(row panels of A, column panels of B) that the first `wave` programs touch, in row-major order (group_m
    None) or §4's grouped order."""
    rows, cols = set(), set()
    for pid in range(wave):
        if group_m is None:
            tile = divmod(pid, tiles_n)
        else:
            per_group = group_m * tiles_n
            first_m = pid // per_group * group_m
            here = min(tiles_m - first_m, group_m)
            tile = (first_m + pid % per_group % here, pid % per_group // here)
        rows.add(tile[0])
        cols.add(tile[1])
    return len(rows), len(cols)


def l2_figures() -> list[str]:
    """§4's L2 example at 4096³ in 128 x 128 tiles (32 x 32): what a wave of one and of two programs per SM touches,
    in 1 MiB panels, in row-major order and grouped."""
    sms = gpu("H100").num_sms
    one, two = sms, 2 * sms  # the example's kernel of two programs per SM, as the reference's plain one (T10.d)
    assert programs_per_sm(**PLAIN_MATMUL) == 2
    a, b = panels(one, 32, 32, None)
    figures = [f"a wave of {one}", f"rows 0 to {a - 1} of tiles: {a} panels of A and all {b} of B, {a + b} MiB"]
    a, b = panels(one, 32, 32, 8)
    figures.append(f"{a} rows by {b} columns: {a} + {b} = {a + b} MiB")
    a, b = panels(two, 32, 32, None)
    figures += [f"two programs on an SM runs {two} at once",
                f"rows 0 to {a - 1}: {a} panels of A and all {b} of B, {a + b} MiB"]
    a, b = panels(two, 32, 32, 8)
    assert a + b > sum(panels(two, 32, 32, None)), "the handout says GROUP_M = 8 touches more than row-major"
    figures.append(f"{a} + {b} = {a + b} MiB, more than row-major")
    a, b = panels(two, 32, 32, 16)
    figures.append(f"GROUP_M = 16 covers {a} rows by {b} columns, {a} + {b} = {a + b} MiB")
    return figures


def sci(value: float) -> str:
    """3 significant digits as the handout writes powers of ten: 1.26e14."""
    return f"{value:.2e}".replace("e+", "e")


def t1_figures() -> list[str]:
    """T1's question and model answer: the unrounded A100 bandwidth, and both roofs across the generations."""
    a100, h100, b200 = gpu("A100"), gpu("H100"), gpu("B200")
    unrounded = a100.bf16_flops_per_sec / 2.039e12  # NVIDIA's A100 80GB SXM datasheet: 2,039 GB/s
    grew = b200.ridge_point() / unrounded
    t7 = 2 * 4096**3 / (C.tiles(4096, 4096, 128, 128) * 2 * 128 * 4096 * 2 + 4096 * 4096 * 2)
    gelu = 5  # FLOP/byte in bf16 (§5)
    return [
        f"T1.a comes out {unrounded:.1f}, {100 * (1 - unrounded / a100.ridge_point()):.2f}% lower",
        f"T1.e\n{grew:.3f}, {100 * (grew / (b200.ridge_point() / a100.ridge_point()) - 1):.2f}% higher",
        f"at {t7:.0f} FLOP/byte, could reach {t7:.0f} × 2e12 = {sci(t7 * a100.hbm_bandwidth_bytes_per_sec)} FLOP/s",
        f"{100 * t7 * a100.hbm_bandwidth_bytes_per_sec / a100.bf16_flops_per_sec:.0f}% of its 312e12",
        f"{sci(t7 * b200.hbm_bandwidth_bytes_per_sec)} on a B200, "
        f"{100 * t7 * b200.hbm_bandwidth_bytes_per_sec / b200.bf16_flops_per_sec:.0f}% of its 2.25e15",
        f"{a100.ridge_point('fp32'):.2f} FLOP/byte", f"to {h100.ridge_point('fp32'):.0f} on the H100",
        f"back to {b200.ridge_point('fp32'):.1f} (75e12 / 8e12)",
        f"(9.75, 20 and {b200.ridge_point('fp32'):.1f} FLOP/byte on the A100, H100 and B200)",
        f"{100 * gelu * a100.hbm_bandwidth_bytes_per_sec / a100.fp32_flops_per_sec:.0f}% of its 19.5e12 fp32 peak",
        f"{100 * gelu * b200.hbm_bandwidth_bytes_per_sec / b200.fp32_flops_per_sec:.0f}% of 75e12",
    ]


def t9_t10_figures() -> list[str]:
    """T9's shared memory and registers, and T10's softmax in L2 and two programs per SM, from the staff's table."""
    stage, rows, h100 = (128 + 128) * 64 * 2, measured(), gpu("H100")
    time = {n: rows["sweep", "triton", f"896x{n}x4096"] for n in (2304, 4736)}
    tiles = {n: C.tiles(896, n, 128, 128) for n in (2304, 4736)}
    softmax_gbs = rows["softmax", "triton", "2048x16384"]["achieved_GB_per_s"]
    in_flight = THREADS_PER_SM // 256 * h100.num_sms  # the softmax's rows of 16384 run 8 warps, 256 threads
    return [
        f"7 stages, {commas(7 * stage)} bytes ({7 * stage // 1024} KiB)", f"227 KiB\n({commas(SHARED_PER_BLOCK_SM90)} bytes)",
        f"8, {commas(8 * stage)} bytes", f"with {FOUR_WARPS_REGISTERS['plain']} registers and the fused one with "
        f"{FOUR_WARPS_REGISTERS['fused']}", f"({PLAIN_MATMUL['registers']} registers for the plain kernel, "
        f"{FUSED_MATMUL_REGISTERS} with the epilogue, no spill)",
        f"takes {PLAIN_MATMUL['registers']} registers per\nthread", f"plain kernel takes {STAFF_PLAIN_REGISTERS} registers",
        f"{PLAIN_MATMUL['registers']} × 256 = {commas(PLAIN_MATMUL['registers'] * 256)} registers",
        f"1.5 × {softmax_gbs:,.0f} = {1.5 * softmax_gbs:,.0f} GB/s",
        f"GeLU's {rows['gelu', 'triton', '67108864']['achieved_GB_per_s']:,.0f}, the rate",
        f"{in_flight:,} rows at once", f"take {in_flight * 16384 * 2 / 2**20:.0f} MiB",
        f"{tiles[4736] / tiles[2304]:.2f} times the tiles in {time[4736]['time_ms'] / time[2304]['time_ms']:.2f} times",
        f"throughput\n{(tiles[4736] / time[4736]['time_ms']) / (tiles[2304] / time[2304]['time_ms']):.2f} times",
        f"({time[4736]['achieved_TFLOP_per_s']:.0f} TFLOP/s against {time[2304]['achieved_TFLOP_per_s']:.0f})",
    ]


def t11_figures() -> list[str]:
    """T11's fp8 arithmetic: the formats' largest values from their bits, the ridges, and the bf16 matmul's n."""
    h100 = gpu("H100")
    e4m3 = (1 + 6 / 8) * 2.0 ** (15 - 7)  # exponent field 15 (bias 7), mantissa 110: 111 is NaN
    e5m2 = (1 + 3 / 4) * 2.0 ** (30 - 15)  # exponent field 30 (bias 15): 31 is IEEE's infinities and NaN
    assert (e4m3, e5m2) == (torch.finfo(torch.float8_e4m3fn).max, torch.finfo(torch.float8_e5m2).max)
    assert torch.finfo(torch.float8_e5m2).smallest_normal / 4 == 2.0 ** -16  # the smallest subnormal
    bf16_n = next(n for n in range(1, 10**5) if 2 * n**3 / (6 * n**2) >= h100.ridge_point())
    return [f"1.75 × 2⁸ = {e4m3:.0f}", f"1.75 × 2¹⁵ = {commas(int(e5m2))}",
            f"1978.9e12 / 3.35e12 = {h100.ridge_point('fp8'):.1f} FLOP/byte", f"bf16 ridge ({h100.ridge_point():.1f})",
            f"reaches {h100.ridge_point('fp8'):.1f} at n = {computed_keys()['T11.d']}",
            f"reaches {h100.ridge_point():.1f} at n = {bf16_n}"]


def t12_figures() -> list[str]:
    """T12's skinny matmul: its FLOPs, bytes and intensity by the reference's matmul_cost, and the split's waves."""
    h100, keys = gpu("H100"), computed_keys()
    flops, bytes_ = C.matmul_cost(16, 4096, 8192, BF16)
    s = keys["T12.c"]
    return [f"2 × 16 × 4096 × 8192 = {commas(flops)} FLOPs", f"{commas(16 * 8192 * 2)} bytes of A",
            f"{commas(8192 * 4096 * 2)} of B and {commas(16 * 4096 * 2)} of C", f"{flops / bytes_:.1f} FLOP/byte",
            f"{bytes_ / h100.hbm_bandwidth_bytes_per_sec * 1e6:.1f} µs at the full",
            f"S = {s} makes {s * keys['T12.a']}, one wave ({100 * s * keys['T12.a'] / h100.num_sms:.0f}% of the",
            f"S = {s + 1} would make {(s + 1) * keys['T12.a']}, two waves",
            f"walks {8192 // s} of",
            f"{commas(keys['T12.d'])} bytes, {100 * keys['T12.d'] / (8192 * 4096 * 2):.1f}% of B's",
            f"makes {C.tiles(4096, 4096, 128, 128)} tiles, {C.tiles(4096, 4096, 128, 128) / h100.num_sms:.1f} waves"]


def handout_figures() -> list[str]:
    """The worked examples' figures, formatted as the handout writes them."""
    h100, h200, b200 = gpu("H100"), gpu("H200"), gpu("B200")
    gelu, soft1, soft2 = C.elementwise_cost(2**24, BF16), C.softmax_cost(4096, 4096, BF16), \
        C.softmax_cost(4096, 4096, BF16, passes=2)
    small, fused = C.matmul_cost(1024, 1024, 1024, BF16), C.matmul_cost(4096, 4096, 1024, BF16, bias=True,
                                                                          activation="gelu")
    savings = C.fusion_savings(4096, 4096, 1024, BF16)
    time = lambda cost: max(cost[0] / h100.bf16_flops_per_sec, cost[1] / h100.hbm_bandwidth_bytes_per_sec) * 1e6
    rate = lambda n: n / C.waves(896, n, 128, 128, h100.num_sms) / 2304
    m = n = k = 4096
    return [
        *(commas(v) for v in (*gelu, *soft1, soft2[1], *small, *fused, savings)),
        f"| {gelu[0] / gelu[1]:g} |", f"| {soft1[0] / soft1[1]:g} |", f"| {soft2[0] / soft2[1]:.2f} |",
        f"| {small[0] / small[1]:.1f} |", f"| {fused[0] / fused[1]:.1f} |",
        f"{time(gelu):.1f} µs", f"{time(soft2):.1f} µs", f"{time(small):.1f} µs", f"{time(fused):.1f} µs",
        f"{2 * 4096 * 4096 * 1024 / h100.bf16_flops_per_sec * 1e6:.1f} µs of FLOPs",
        f"≈ {fused[0] / (fused[1] + savings):.0f},", f"fused, {fused[0] / fused[1]:.0f}, above both",
        f"67e12 / 3.35e12 = {h100.ridge_point('fp32'):.0f}",
        f"126 / 132 = {C.tile_efficiency(896, 2304, 128, 128, 132):.3f}",
        f"133 / 264 = {C.tile_efficiency(896, 2432, 128, 128, 132):.3f}",
        f"259 / 264 = {C.tile_efficiency(896, 4736, 128, 128, 132):.3f}",
        f"| {rate(2432):.2f} |", f"| {rate(4736):.2f} |", f"{4736 / 2432:.2f} times the FLOPs",
        f"one wave ({C.tile_efficiency(896, 2432, 128, 128, b200.num_sms):.3f})",
        commas(132 * SHARED_PER_SM), commas(2 * 200 * 300 * 130), commas(2 * m * n * k * 2),
        commas(C.tiles(m, n, 128, 128) * 2 * 128 * k * 2), commas(C.matmul_cost(m, n, k, BF16)[1]),
        f"{(2 * m * n * k * 2 + m * n * 2) / (C.tiles(m, n, 128, 128) * 2 * 128 * k * 2 + m * n * 2):.0f} times less",
        *l2_figures(), *t1_figures(), *t9_t10_figures(), *t11_figures(), *t12_figures(),
    ]


@pytest.mark.parametrize("figure", handout_figures())
def test_the_handouts_worked_figures_are_computed(figure):
    assert figure in HANDOUT, f"the handout should say {figure!r}"


def test_the_handouts_registers_are_the_locked_tritons_build(tmp_path):
    """The registers and shared memory T9 and T10 state are what the Triton of the lock files builds for sm_90
    from the reference (the plain and the fused matmul kernel, at the reference's 8 warps and at 4), with no
    spill; and §4's instructions: wgmma and cp.async at those configs, no cp.async (and a third of the shared
    memory) at 1 stage. Another Triton builds other figures: the test runs
    only where the locked version is installed."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    triton = pytest.importorskip("triton")
    locked = re.search(r"^triton==([\d.]+)", (ROOT / "requirements-instructor.lock").read_text(), re.M).group(1)
    if triton.__version__ != locked:
        pytest.skip(f"the handout states the builds of Triton {locked}; this is {triton.__version__}")
    config = "BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)"
    # §4's "What the H100 makes of it": the reference's config at 4 warps (T9) and at 1 stage. (Which tiles give
    # mma.sync is read from the tutorial kernel's builds, tests/tooling/test_crosscompile.py.)
    variants = {"four": config.replace("num_warps=8", "num_warps=4"),
                "one": config.replace("num_stages=3", "num_stages=1")}
    trees = {"eight": "solutions"}
    for name, changed in variants.items():
        shutil.copytree(ROOT / "solutions" / "gpu_kernels", tmp_path / name / "gpu_kernels")
        matmul = tmp_path / name / "gpu_kernels" / "matmul.py"
        assert matmul.read_text().count(config) == 1, f"the reference's bf16 config is no longer {config}"
        matmul.write_text(matmul.read_text().replace(config, changed))
        trees[name] = str(tmp_path / name)
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TRITON_INTERPRET", None)
    built = {}
    for name, tree in trees.items():
        out = tmp_path / f"{name}.json"
        done = subprocess.run([sys.executable, "-m", "kernels.crosscompile", "--quick", "--assignment", "gpu_kernels",
                               "--impl", tree, "--jobs", "1", "--json", str(out)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        builds = [b for b in json.loads(out.read_text()) if b["kernel"] == "_matmul_kernel"]
        assert len(builds) == 2 and all(b["spill_bytes"] == 0 for b in builds), builds
        built[name] = builds
    # The epilogue only adds live values: the plain kernel is the build with fewer registers.
    eight, four = (sorted(b["registers"] for b in built[n]) for n in ("eight", "four"))
    assert eight == [PLAIN_MATMUL["registers"], FUSED_MATMUL_REGISTERS], eight
    assert four == [FOUR_WARPS_REGISTERS["plain"], FOUR_WARPS_REGISTERS["fused"]], four
    assert {(b["shared_bytes"], b["threads"]) for b in built["eight"]} == {(PLAIN_MATMUL["shared"],
                                                                             PLAIN_MATMUL["threads"])}
    cores = {name: {(b["tensor_cores"], b["async_copies"]) for b in builds} for name, builds in built.items()}
    assert cores == {"eight": {("wgmma", True)}, "four": {("wgmma", True)}, "one": {("wgmma", False)}}, cores
    one = {b["shared_bytes"] for b in built["one"]}
    assert one == {PLAIN_MATMUL["shared"] // 3}, one
    for figure in (f"takes {PLAIN_MATMUL['shared'] // 3 // 1024} KiB of shared memory at 1 stage (no `cp.async`)",
                   f"at 2 and {PLAIN_MATMUL['shared'] // 1024} KiB"):
        assert figure in HANDOUT, f"the handout should say {figure!r}"
