"""The handouts' numeric answer keys, computed from the reference solutions and found in the handouts.

Each key is computed by the solution's own functions (in a subprocess with solutions/ on the path, as
the tests of the stubs import assignments/), then the figure as the handout writes it must appear in
the handout. A key that drifts from its computation, or is rounded the wrong way, fails here.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANDOUTS = {name: (ROOT / "solutions" / name / "README.md").read_text() for name in
            ("resource_accounting", "flash_attention")}

COMPUTE = r"""
import json, math
import torch
from resource_accounting import flops as F, memory as M, network as N
from flash_attention import analysis as A
from kernels.hardware import gpu

h100, h200 = gpu("H100"), gpu("H200")
peak, bw = h100.bf16_flops_per_sec, h100.hbm_bandwidth_bytes_per_sec

def first_batch(ridge, d):
    return next(b for b in range(1, 10**6) if F.decode_arithmetic_intensity(b, d, 2) >= ridge)

fwd = A.attention_flops(1, 16, 16384, 16384, 64)
causal = A.attention_flops(1, 16, 16384, 16384, 64, is_causal=True)
l2 = A.flash_attention_hbm_bytes(1, 16, 16384, 16384, 64, 16384)
print(json.dumps({
    "h100 ridge": h100.ridge_point(), "h200 ridge": h200.ridge_point(),
    "days": F.training_days(70e9, 15e12, 1024, peak, 0.5),
    "mfu": F.mfu(4e15, 10.0, peak),
    "decode 1": F.decode_arithmetic_intensity(1, 8192, 2), "decode 64": F.decode_arithmetic_intensity(64, 8192, 2),
    "prefill 4096": F.prefill_arithmetic_intensity(4096, 8192, 2),
    # The worked example of §6: other sizes than Q6.1.a's and Q6.1.b's, whose keys it must not give.
    "decode 32": F.decode_arithmetic_intensity(32, 8192, 2), "prefill 2048": F.prefill_arithmetic_intensity(2048, 8192, 2),
    "q6.1 batch": first_batch(h100.ridge_point(), 8192),
    "q6.1 at batch": F.decode_arithmetic_intensity(first_batch(h100.ridge_point(), 8192), 8192, 2),
    "q6.1 below": F.decode_arithmetic_intensity(first_batch(h100.ridge_point(), 8192) - 1, 8192, 2),
    "params 8x3": 8 * 8 * 3, "forward flops": N.forward_flops(1024, 256, 1), "backward flops": N.backward_flops(1024, 256, 1),
    "max params": M.max_trainable_parameters(8 * 80 * 10**9),
    "w4 batch": first_batch(h200.ridge_point(), 8192),
    "w4 at batch": F.decode_arithmetic_intensity(first_batch(h200.ridge_point(), 8192), 8192, 2),
    "w4 below": F.decode_arithmetic_intensity(first_batch(h200.ridge_point(), 8192) - 1, 8192, 2),
    "w4 decode 64": F.decode_arithmetic_intensity(64, 8192, 2), "w4 prefill 512": F.prefill_arithmetic_intensity(512, 8192, 2),
    "n1 causal": causal, "n1 total": 3.5 * causal, "n1 tflops": 3.5 * causal / 5.364e-3 / 1e12,
    "n2 bytes": A.naive_attention_hbm_bytes(1, 16, 16384, 16384, 64),
    "n2 ms": A.naive_attention_hbm_bytes(1, 16, 16384, 16384, 64) / bw * 1e3,
    "n3 bytes": A.flash_attention_hbm_bytes(1, 16, 16384, 16384, 64, 128),
    "n3 naive intensity": fwd / A.naive_attention_hbm_bytes(1, 16, 16384, 16384, 64),
    "n3 tiled intensity": fwd / A.flash_attention_hbm_bytes(1, 16, 16384, 16384, 64, 128),
    "n3 l2 bytes": l2, "n3 l2 intensity": fwd / l2, "n3 l2 us": l2 / bw * 1e6,
    "worked naive": A.naive_attention_hbm_bytes(1, 1, 1024, 1024, 64),
    "worked flash": A.flash_attention_hbm_bytes(1, 1, 1024, 1024, 64, 64),
    "w2 p bytes": 16 * 16384**2 * 2, "w2 lse bytes": 16 * 16384 * 4,
    "w2 recompute flops": fwd / 2, "w2 recompute ms": fwd / 2 / peak * 1e3,
    "w2 traffic bytes": 2 * 16 * 16384**2 * 2, "w2 traffic ms": 2 * 16 * 16384**2 * 2 / bw * 1e3,
    "w3 tiles": 128 * 129 // 2,
    "w3 percent": 100 * (128 * 129 // 2) / 128**2, "w6 percent": 100 * (128 - 80) / 128,
    "q6.1 read us": 8192**2 * 2 / bw * 1e6, "q6.1 prefill us": F.matmul_flops(4096, 8192, 8192) / peak * 1e6,
    "q9.1 units": (2 * N.forward_flops(1, 1, 1) + N.backward_flops(1, 1, 1)) / 1,
    "q9.1 percent": 100 * N.forward_flops(1, 1, 1) / (N.forward_flops(1, 1, 1) + N.backward_flops(1, 1, 1)),
    # n with 2⁻ⁿ the smallest normal number: 1 − bias = 2 − 2^(e − 1) for e exponent bits, and torch's own tiny.
    "bf16 exponent": 2 ** (M.float_format(torch.bfloat16).exponent_bits - 1) - 2,
    "fp16 exponent": 2 ** (M.float_format(torch.float16).exponent_bits - 1) - 2,
    "bf16 tiny": -math.log2(torch.finfo(torch.bfloat16).tiny), "fp16 tiny": -math.log2(torch.finfo(torch.float16).tiny),
}))
"""


@pytest.fixture(scope="module")
def keys() -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "solutions"), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", COMPUTE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def commas(value: float) -> str:
    return f"{int(value):,}"


# (handout, key, how the handout writes it)
WRITTEN = [
    ("resource_accounting", "h100 ridge", lambda v: f"≈ {round(v)} FLOP/byte"),
    ("resource_accounting", "days", lambda v: f"≈ **{v:.1f} days**"),
    ("resource_accounting", "mfu", lambda v: f"MFU of {v:.3f}"),
    ("resource_accounting", "decode 32", lambda v: f"at batch 32 ≈ {v:.1f}"),
    ("resource_accounting", "prefill 2048", lambda v: f"prefill of 2048 tokens is ≈ {round(v)}"),
    ("resource_accounting", "q6.1 batch", lambda v: f"**{v}** sequences"),
    ("resource_accounting", "q6.1 at batch", lambda v: f"= {v:.2f}; 318 gives"),
    ("resource_accounting", "q6.1 below", lambda v: f"318 gives {v:.2f})"),
    ("resource_accounting", "forward flops", commas),
    ("resource_accounting", "backward flops", commas),
    ("flash_attention", "h100 ridge", lambda v: f"≈ {round(v)} FLOP/byte"),
    ("flash_attention", "h200 ridge", lambda v: f"≈ {round(v)} for an H200"),
    ("flash_attention", "w4 decode 64", lambda v: f"{v:.1f} FLOP/byte, below the H200's ridge"),
    ("flash_attention", "w4 prefill 512", lambda v: f"{v:.1f} FLOP/byte, above the ridge"),
    ("flash_attention", "h200 ridge", lambda v: f"ridge of {v:g} at B"),
    ("flash_attention", "w4 batch", lambda v: f"B = **{v}**"),
    ("flash_attention", "w4 at batch", lambda v: f"({v:.2f}; B = 217 gives"),
    ("flash_attention", "w4 below", lambda v: f"217 gives {v:.2f}, just below"),
    ("flash_attention", "n1 causal", lambda v: f"= {v:.4e} FLOPs forward".replace("e+11", "e11")),
    ("flash_attention", "n1 total", lambda v: f"= {v:.4e} FLOPs".replace("e+12", "e12")),
    ("flash_attention", "n1 tflops", lambda v: f"{v:.1f} TFLOP/s"),
    ("flash_attention", "n2 bytes", commas),
    ("flash_attention", "n2 ms", lambda v: f"{v:.1f} ms at"),
    ("flash_attention", "n3 bytes", commas),
    ("flash_attention", "n3 naive intensity", lambda v: f"naive {v:.1f} FLOP/byte"),
    ("flash_attention", "n3 tiled intensity", lambda v: f"tiled {v:.1f}"),
    ("flash_attention", "n3 l2 bytes", commas),
    ("flash_attention", "n3 l2 intensity", lambda v: f"intensity {v:.1f} FLOP/byte"),
    ("flash_attention", "n3 l2 us", lambda v: f"({round(v)} µs at"),
    ("flash_attention", "worked naive", lambda v: f"**{commas(v)}** bytes"),
    ("flash_attention", "worked flash", lambda v: f"**{commas(v)}** bytes"),
    ("flash_attention", "w2 p bytes", commas),
    ("flash_attention", "w2 lse bytes", commas),
    ("flash_attention", "w3 tiles", commas),
    ("flash_attention", "w2 recompute flops", lambda v: f"= {v:.4e} FLOPs, ".replace("e+11", "e11")),
    ("flash_attention", "w2 recompute ms", lambda v: f"{v:.2f} ms at the H100's"),
    ("flash_attention", "w2 traffic bytes", commas),
    ("flash_attention", "w2 traffic ms", lambda v: f"{v:.2f} ms at 3.35e12"),
    ("flash_attention", "n3 l2 intensity", lambda v: f"about {int(v):,} FLOP/byte once"),
]


@pytest.mark.parametrize("handout, key, written", WRITTEN, ids=[f"{h}-{k}" for h, k, _ in WRITTEN])
def test_the_handout_states_the_computed_key(keys, handout, key, written):
    text = written(keys[key])
    assert text in HANDOUTS[handout], f"{handout}/README.md should say {text!r} ({key} = {keys[key]!r})"


def test_recomputing_in_w2_costs_a_tenth_of_the_traffic_it_saves(keys):
    """W2's model answer: the extra matmul is cheap next to writing and reading P, whatever bound attention is under."""
    assert keys["w2 recompute ms"] < keys["w2 traffic ms"] / 5


def test_q10_1s_smallest_normals_are_torchs_own(keys):
    """Q10.1.a and .b: the n of 2⁻ⁿ from the exponent bits (1 − bias) is what torch.finfo(dtype).tiny holds."""
    assert (keys["bf16 exponent"], keys["fp16 exponent"]) == (keys["bf16 tiny"], keys["fp16 tiny"]) == (126, 14)


def test_the_first_batches_that_reach_the_ridges_are_rounded_up(keys):
    """The keys that ask "from what batch on" are the first whole batch at or above the ridge."""
    assert (keys["q6.1 batch"], keys["w4 batch"]) == (319, 218)
    assert keys["q6.1 below"] < keys["h100 ridge"] <= keys["q6.1 at batch"]
    assert keys["w4 below"] < keys["h200 ridge"] <= keys["w4 at batch"]
    assert math.isclose(keys["h200 ridge"], 206.125)


# Each numeric part's key (the `<ID>.<letter> = value` lines of the handouts) and the computation it must equal.
PART_KEYS = {
    "W2.a": "w2 p bytes", "W2.b": "w2 lse bytes", "W3.a": "w3 tiles", "W3.b": "w3 percent",
    "W4.a": "w4 decode 64", "W4.b": "w4 prefill 512", "W4.c": "w4 batch", "W6.a": "w6 percent",
    "Q6.1.a": "decode 64", "Q6.1.b": "prefill 4096", "Q6.1.c": "q6.1 read us", "Q6.1.d": "q6.1 prefill us",
    "Q6.1.e": "q6.1 batch", "Q9.1.a": "q9.1 units", "Q9.1.b": "q9.1 percent", "Q10.1.a": "bf16 exponent",
    "Q10.1.b": "fp16 exponent",
}


def _parts():
    from autograder.written.answers import handout_questions

    return [part for name in sorted(HANDOUTS) for q in handout_questions(name) for part in q.parts]


def test_every_numeric_key_of_the_handouts_is_computed_here():
    assert sorted(p.id for p in _parts()) == sorted(PART_KEYS)


@pytest.mark.parametrize("part", _parts(), ids=lambda p: p.id)
def test_a_key_line_equals_its_computation_to_the_digits_written(keys, part):
    """The key, rounded as written, is within 0.1% of the computed value and inside its own tolerance."""
    computed = keys[PART_KEYS[part.id]]
    assert math.isclose(part.key, computed, rel_tol=1e-3), (part.id, part.key, computed)
    assert part.tolerance.accepts(computed, part.key), (part.id, part.key, computed)
