"""analysis.py: FLOPs and HBM bytes of attention, against the handout's formulas (§4)."""

import pytest

ANALYSIS = "flash_attention.analysis"

# (batch, heads, n_queries, n_keys, head_dim): a small case, cross-attention, and the CS336 2025
# leaderboard configuration (batch 1, 16 heads, seq 16384, d 64).
CONFIGS = [(1, 1, 1024, 1024, 64), (2, 4, 100, 300, 80), (1, 16, 16384, 16384, 64)]
IDS = [f"b{b}-h{h}-nq{nq}-nk{nk}-d{d}" for b, h, nq, nk, d in CONFIGS]  # a failing id says which sizes


@pytest.mark.points(1)
@pytest.mark.task("analysis.attention_flops")
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_forward_flops_are_four_b_h_nq_nk_d(student, config):
    """attention_flops returns the float 4·B·H·Nq·Nk·D for the forward (two matmuls of 2·Nq·Nk·D)."""
    b, h, nq, nk, d = config
    flops = student.module(ANALYSIS).attention_flops(b, h, nq, nk, d)
    assert type(flops) is float, f"attention_flops must return a float, got {type(flops).__name__}"
    assert flops == 4.0 * b * h * nq * nk * d


@pytest.mark.points(1)
@pytest.mark.task("analysis.attention_flops")
def test_causal_forward_flops_are_halved(student):
    """attention_flops(..., is_causal=True) is half the non-causal forward."""
    flops = student.module(ANALYSIS).attention_flops(1, 16, 16384, 16384, 64, is_causal=True)
    assert flops == 4.0 * 16 * 16384**2 * 64 / 2


@pytest.mark.points(1)
@pytest.mark.task("analysis.attention_flops")
@pytest.mark.parametrize("is_causal", [False, True])
def test_backward_flops_are_two_and_a_half_forwards(student, is_causal):
    """attention_flops(..., backward=True) is the backward alone: 2.5 times the forward.

    Hint: 2 for the backward's four matmuls (twice the forward's two) plus 0.5 for recomputing S = Q Kᵀ.
    """
    forward = 4.0 * 2 * 8 * 512 * 512 * 128 / (2 if is_causal else 1)
    flops = student.module(ANALYSIS).attention_flops(2, 8, 512, 512, 128, is_causal=is_causal, backward=True)
    assert flops == 2.5 * forward


@pytest.mark.points(1)
@pytest.mark.task("analysis.naive_attention_hbm_bytes")
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
@pytest.mark.parametrize("bytes_per_element", [2, 4], ids=lambda size: f"{size}-bytes")
def test_naive_bytes_follow_the_three_kernel_rule(student, config, bytes_per_element):
    """naive_attention_hbm_bytes is the int B·H·(2·Nq·D + 2·Nk·D + 4·Nq·Nk)·bytes_per_element.

    Hint: S = Q Kᵀ reads Q and K and writes S; softmax reads S and writes P; P V reads P and V, writes O.
    """
    b, h, nq, nk, d = config
    expected = b * h * (2 * nq * d + 2 * nk * d + 4 * nq * nk) * bytes_per_element
    got = student.module(ANALYSIS).naive_attention_hbm_bytes(b, h, nq, nk, d, bytes_per_element=bytes_per_element)
    assert type(got) is int, f"naive_attention_hbm_bytes must return an int, got {type(got).__name__}"
    assert got == expected


@pytest.mark.points(1)
@pytest.mark.task("analysis.flash_attention_hbm_bytes")
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
@pytest.mark.parametrize("q_tile", [64, 128, 96], ids=lambda tile: f"q_tile={tile}")
def test_flash_bytes_reread_k_and_v_once_per_query_tile(student, config, q_tile):
    """flash_attention_hbm_bytes is the int B·H·((2·Nq·D + 2·T·Nk·D)·bytes + 4·Nq), T = ceil(Nq / q_tile).

    Hint: each query tile's program reads its Q rows, all of K and V, and writes its O rows and float32 lse.
    """
    b, h, nq, nk, d = config
    tiles = -(-nq // q_tile)
    expected = b * h * ((2 * nq * d + 2 * tiles * nk * d) * 2 + 4 * nq)
    got = student.module(ANALYSIS).flash_attention_hbm_bytes(b, h, nq, nk, d, q_tile)
    assert type(got) is int, f"flash_attention_hbm_bytes must return an int, got {type(got).__name__}"
    assert got == expected


@pytest.mark.points(1)
@pytest.mark.task("analysis.flash_attention_hbm_bytes")
def test_worked_example_of_the_handout(student):
    """The handout's §4 worked example: B=1, H=1, N=1024, D=64, bf16, q_tile=64.

    Naive 8,912,896 bytes; FlashAttention 4,460,544 bytes.
    """
    analysis = student.module(ANALYSIS)
    assert analysis.naive_attention_hbm_bytes(1, 1, 1024, 1024, 64) == 8_912_896
    assert analysis.flash_attention_hbm_bytes(1, 1, 1024, 1024, 64, 64) == 4_460_544


@pytest.mark.points(2)
@pytest.mark.task("analysis.attention_flops")
def test_numeric_questions_at_the_leaderboard_configuration(student):
    """The handout's numeric questions N1 to N3 (batch 1, 16 heads, N 16384, d 64, bf16): causal forward
    5.4976e11 FLOPs and 3.5x that with the backward; naive 34,493,956,096 bytes; tiled (q_tile 128)
    8,658,092,032 bytes, and 135,266,304 bytes once K and V are read from HBM only once (the L2 step)."""
    analysis = student.module(ANALYSIS)
    forward = analysis.attention_flops(1, 16, 16384, 16384, 64, is_causal=True)
    backward = analysis.attention_flops(1, 16, 16384, 16384, 64, is_causal=True, backward=True)
    assert (forward, forward + backward) == (549_755_813_888.0, 1_924_145_348_608.0)
    assert analysis.naive_attention_hbm_bytes(1, 16, 16384, 16384, 64) == 34_493_956_096
    assert analysis.flash_attention_hbm_bytes(1, 16, 16384, 16384, 64, 128) == 8_658_092_032
    assert analysis.flash_attention_hbm_bytes(1, 16, 16384, 16384, 64, 16384) == 135_266_304


BAD_SIZES = [dict(batch=0), dict(heads=-1), dict(n_queries=0), dict(head_dim=2.0)]


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("analysis.attention_flops")
@pytest.mark.parametrize("bad", BAD_SIZES, ids=lambda bad: "-".join(f"{k}={v}" for k, v in bad.items()))
def test_counts_reject_sizes_that_are_not_positive_ints(student, bad):
    """Every count raises ValueError for a size that is not a positive int."""
    analysis = student.module(ANALYSIS)
    sizes = dict(batch=1, heads=2, n_queries=8, n_keys=8, head_dim=16) | bad
    for call in (lambda: analysis.attention_flops(**sizes), lambda: analysis.naive_attention_hbm_bytes(**sizes),
                 lambda: analysis.flash_attention_hbm_bytes(**sizes, q_tile=16)):
        with pytest.raises(ValueError):
            call()


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("analysis.attention_flops")
def test_causal_flops_need_equal_lengths(student):
    """attention_flops raises ValueError for is_causal=True with n_queries != n_keys."""
    with pytest.raises(ValueError):
        student.module(ANALYSIS).attention_flops(1, 1, 8, 16, 16, is_causal=True)
