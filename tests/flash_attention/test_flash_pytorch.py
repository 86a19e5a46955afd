"""flash_pytorch.py: the tiled forward, the backward by recomputation, and the autograd Function."""

import pytest
import torch

from tests.flash_attention import scenarios

FLASH = "flash_attention.flash_pytorch"

# (lead dims, n_queries, n_keys, head_dim, is_causal, q_tile, k_tile): lengths that are not multiples
# of the tiles, n_queries != n_keys, tiles larger than the sequence, leading dims of rank 1 to 3.
SHAPES = [
    ((3,), 37, 53, 16, False, 16, 16),
    ((2, 2), 70, 70, 32, True, 32, 16),
    ((2, 1, 2), 16, 40, 24, False, 64, 32),
    ((2,), 45, 45, 16, True, 16, 32),
]
IDS = [f"{'x'.join(map(str, s[0]))}-nq{s[1]}-nk{s[2]}-d{s[3]}-{'causal' if s[4] else 'full'}-tiles{s[5]}x{s[6]}"
       for s in SHAPES]


@pytest.mark.points(3)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
@pytest.mark.parametrize("lead, n_queries, n_keys, head_dim, is_causal, q_tile, k_tile", SHAPES, ids=IDS)
def test_forward_output_matches_float64(student, trusted, lead, n_queries, n_keys, head_dim, is_causal, q_tile,
                                        k_tile):
    """flash_forward_pytorch's o (float32, shape of q) matches float64 attention within 1e-4.

    Hint (values, close): after every key tile, rescale l and the accumulator by exp(m_old - m_new) before
    adding.
    Hint (nan): a row of NaN saw no key at all (its l stayed 0, and 0 / 0 is NaN): check the key loop's
    bounds; causal, a query tile's loop runs up to and through the key tile that holds its diagonal.
    """
    x = trusted.inputs(3, lead, n_queries, n_keys, head_dim)
    expected, _ = trusted.attention64(x["q"], x["k"], x["v"], is_causal)
    o, _ = student.module(FLASH).flash_forward_pytorch(x["q"], x["k"], x["v"], is_causal, q_tile, k_tile)
    trusted.assert_close("o", o, expected, torch.float32, trusted.fp32)


@pytest.mark.points(2)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
@pytest.mark.parametrize("lead, n_queries, n_keys, head_dim, is_causal, q_tile, k_tile", SHAPES, ids=IDS)
def test_forward_lse_matches_float64(student, trusted, lead, n_queries, n_keys, head_dim, is_causal, q_tile,
                                     k_tile):
    """flash_forward_pytorch's lse (float32, shape (..., n_queries)) is the natural-log logsumexp of each row.

    Hint (values, close): lse = m + log(l) with the final running max m and denominator l, of the scaled
    scores S / sqrt(d).
    Hint (scale): lse is in natural-log units: log, not log2 (a log2 lse is lse · 1.4427).
    Hint (nan): a row of NaN or infinity saw no key at all: check the key loop's bounds.
    """
    x = trusted.inputs(4, lead, n_queries, n_keys, head_dim)
    _, expected = trusted.attention64(x["q"], x["k"], x["v"], is_causal)
    _, lse = student.module(FLASH).flash_forward_pytorch(x["q"], x["k"], x["v"], is_causal, q_tile, k_tile)
    trusted.assert_close("lse", lse, expected, torch.float32, trusted.fp32)


@pytest.mark.points(2)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
def test_forward_keeps_bf16_outputs_and_float32_lse(student, trusted):
    """On bfloat16 inputs, o is bfloat16 and lse float32, both close to float64 (bf16 tolerance)."""
    x = trusted.inputs(5, (2,), 40, 40, 32, dtype=torch.bfloat16)
    expected_o, expected_lse = trusted.attention64(x["q"], x["k"], x["v"], True)
    o, lse = student.module(FLASH).flash_forward_pytorch(x["q"], x["k"], x["v"], True)
    trusted.assert_close("o", o, expected_o, torch.bfloat16, trusted.half[torch.bfloat16])
    trusted.assert_close("lse", lse, expected_lse, torch.float32, trusted.half[torch.bfloat16])


@pytest.mark.points(3)
@pytest.mark.task("flash_pytorch.flash_backward_pytorch")
@pytest.mark.parametrize("lead, n_queries, n_keys, head_dim, is_causal, q_tile, k_tile", SHAPES, ids=IDS)
def test_backward_matches_float64_autograd(student, trusted, lead, n_queries, n_keys, head_dim, is_causal, q_tile,
                                           k_tile):
    """flash_backward_pytorch's (dq, dk, dv), given float64-exact o and lse, match autograd in float64.

    Hint (values, close, nan): D = rowsum(o * do); P = exp(S - lse) with S scaled; dS = P * (dP - D).
    Hint (scale): dQ and dK carry the 1/sqrt(d) scale, once each: a constant factor off is that scale missing
    or applied twice.
    """
    x = trusted.inputs(6, lead, n_queries, n_keys, head_dim)
    o, lse = trusted.attention64(x["q"], x["k"], x["v"], is_causal)
    grads = student.module(FLASH).flash_backward_pytorch(x["q"], x["k"], x["v"], o.float(), lse.float(), x["do"],
                                                         is_causal, q_tile, k_tile)
    expected = trusted.gradients64(x["q"], x["k"], x["v"], x["do"], is_causal)
    assert type(grads) is tuple and len(grads) == 3, "flash_backward_pytorch must return the tuple (dq, dk, dv)"
    for name, got, want in zip(("dq", "dk", "dv"), grads, expected):
        trusted.assert_close(name, got, want, torch.float32, trusted.fp32)


@pytest.mark.points(3)
@pytest.mark.task("flash_pytorch.FlashAttentionPytorch")
@pytest.mark.parametrize("is_causal", [False, True])
def test_autograd_function_matches_float64(student, trusted, is_causal):
    """FlashAttentionPytorch.apply's output and the gradients autograd gets through it match float64."""
    x = trusted.inputs(7, (2, 3), 33, 33, 16)
    got = student.run(scenarios.pytorch_autograd, **x, is_causal=is_causal)
    expected_o, _ = trusted.attention64(x["q"], x["k"], x["v"], is_causal)
    expected = dict(zip(("dq", "dk", "dv"), trusted.gradients64(x["q"], x["k"], x["v"], x["do"], is_causal)))
    trusted.assert_close("o", got["o"], expected_o, torch.float32, trusted.fp32)
    for name, want in expected.items():
        trusted.assert_close(name, got[name], want, torch.float32, trusted.fp32)


@pytest.mark.edge
@pytest.mark.points(2)
@pytest.mark.task("flash_pytorch.FlashAttentionPytorch")
def test_autograd_function_saves_lse_as_its_only_row_vector(student):
    """Among the tensors FlashAttentionPytorch saves for backward, exactly one has shape (..., n_queries):
    the lse, in float32.

    Hint: ctx.save_for_backward(q, k, v, o, lse); keep is_causal on ctx as a plain attribute.
    """
    saved = student.run(scenarios.pytorch_saved_tensors, seed=8, lead=[2, 3], n_queries=24, n_keys=40, head_dim=16)
    rows = [t for t in saved if t["shape"] == [2, 3, 24]]
    assert len(rows) == 1, f"expected exactly one saved tensor of shape [2, 3, 24] (the lse), got {saved}"
    assert rows[0]["dtype"] == torch.float32, f"the saved lse must be float32, got {rows[0]['dtype']}"


@pytest.mark.edge
@pytest.mark.points(2)
@pytest.mark.task("flash_pytorch.FlashAttentionPytorch")
def test_autograd_function_saves_no_score_matrix(student):
    """FlashAttentionPytorch saves nothing as large as the n_queries x n_keys scores of one head."""
    saved = student.run(scenarios.pytorch_saved_tensors, seed=9, lead=[1], n_queries=64, n_keys=96, head_dim=16)
    for t in saved:
        numel = 1
        for size in t["shape"]:
            numel *= size
        assert numel < 64 * 96, f"a saved tensor of shape {t['shape']} is as large as the score matrix"


@pytest.mark.points(4)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
@pytest.mark.parametrize("is_causal", [False, True])
def test_forward_never_materialises_the_score_matrix(student, trusted, is_causal):
    """At N = 1024, d = 16 (one head, 64 x 64 tiles) flash_forward_pytorch returns the right o, never
    creates a tensor of N·N/4 elements or more, and holds at most 1 MiB alive at once (the naive scores
    alone are 4 MiB).

    Hint ("the forward created", "the forward held"): loop over query tiles and key tiles; the largest
    intermediate is one (q_tile, k_tile) tile.
    """
    n = 1024
    got = student.run(scenarios.pytorch_forward_memory, seed=10, n=n, head_dim=16, tile=64, is_causal=is_causal)
    assert type(got["result"]) in (tuple, list) and len(got["result"]) == 2, \
        f"expected the pair (o, lse), got {type(got['result']).__name__}"
    gen = torch.Generator().manual_seed(10)  # the scenario's inputs, drawn again here
    q, k, v = (torch.randn(1, n, 16, generator=gen) for _ in range(3))
    trusted.assert_close("o", got["result"][0], trusted.attention64(q, k, v, is_causal)[0], torch.float32,
                         trusted.fp32)
    assert got["largest_numel"] < n * n // 4, (
        f"the forward created a tensor of {got['largest_numel']} elements; the scores have {n * n}")
    assert got["peak_bytes"] <= 2**20, f"the forward held {got['peak_bytes']} bytes alive at once"


@pytest.mark.edge
@pytest.mark.points(3)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
def test_causal_forward_skips_tiles_above_the_diagonal(student):
    """Causal, with 16 x 16 tiles at N = 128, the forward runs at most 60% of the non-causal matmul FLOPs
    (the tiles on and below the diagonal are 36 of 64): tiles above the diagonal are skipped, not masked.

    Hint ("causal forward ran"): for a query tile ending at row q_end, stop the key loop at q_end.
    """
    sizes = dict(seed=11, n=128, head_dim=16, tile=16)
    full = student.run(scenarios.pytorch_forward_matmul_flops, **sizes, is_causal=False)
    causal = student.run(scenarios.pytorch_forward_matmul_flops, **sizes, is_causal=True)
    assert full == 4 * 128 * 128 * 16, f"non-causal forward: expected 4·N²·d = {4 * 128 * 128 * 16} FLOPs, got {full}"
    assert causal <= 0.6 * full, f"causal forward ran {causal} matmul FLOPs, {causal / full:.0%} of non-causal"


BAD_INPUTS = {
    "causal with n_queries != n_keys": ((1, 8, 16), (1, 12, 16), (1, 12, 16), True),
    "q and k head dims differ": ((1, 8, 16), (1, 8, 32), (1, 8, 32), False),
    "k and v shapes differ": ((1, 8, 16), (1, 8, 16), (1, 9, 16), False),
}


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_forward_rejects_inputs_outside_the_contract(student, case):
    """flash_forward_pytorch raises ValueError for causal with n_queries != n_keys and mismatched shapes."""
    q_shape, k_shape, v_shape, is_causal = BAD_INPUTS[case]
    with pytest.raises(ValueError):
        student.module(FLASH).flash_forward_pytorch(torch.zeros(q_shape), torch.zeros(k_shape),
                                                    torch.zeros(v_shape), is_causal)
