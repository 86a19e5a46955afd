"""§2 Named dimensions with einops: attention scores, splitting and merging heads."""

import pytest
import torch


@pytest.mark.points(2)
@pytest.mark.task("einops_ops.attention_scores")
@pytest.mark.parametrize("lead", [(), (3,), (2, 3)], ids=["no-batch", "batch", "batch-heads"])
def test_attention_scores_are_query_key_dot_products(einops_ops, lead):
    """attention_scores(q, k)[..., i, j] is the dot product of query i and key j, for any leading dims.

    Shapes: q (..., 5, 4), k (..., 6, 4) give (..., 5, 6); no scaling.
    """
    torch.manual_seed(0)
    q, k = torch.randn(*lead, 5, 4, dtype=torch.float64), torch.randn(*lead, 6, 4, dtype=torch.float64)
    got = einops_ops.attention_scores(q, k)
    assert got.shape == (*lead, 5, 6) and got.dtype == torch.float64
    torch.testing.assert_close(got, q @ k.transpose(-1, -2), rtol=1e-12, atol=1e-12)


@pytest.mark.points(2)
@pytest.mark.task("einops_ops.split_heads")
@pytest.mark.parametrize("lead", [(), (2,), (2, 3)], ids=["no-batch", "batch", "two-batch-dims"])
def test_split_heads_gives_each_head_its_slice_of_features(einops_ops, lead):
    """split_heads(x, 3) of x (..., 5, 12) is (..., 3, 5, 4) and head h holds features 4h to 4h + 3."""
    x = torch.arange(torch.Size((*lead, 5, 12)).numel(), dtype=torch.float32).reshape(*lead, 5, 12)
    got = einops_ops.split_heads(x, 3)
    assert got.shape == (*lead, 3, 5, 4)
    for h in range(3):
        assert torch.equal(got[..., h, :, :], x[..., 4 * h : 4 * h + 4])


@pytest.mark.points(1)
@pytest.mark.task("einops_ops.merge_heads")
def test_merge_heads_undoes_split_heads(einops_ops):
    """merge_heads(split_heads(x, h)) == x exactly, and merge_heads of a (2, 4, 5, 3) tensor is (2, 5, 12)."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 12)
    heads = einops_ops.split_heads(x, 4)
    assert torch.equal(einops_ops.merge_heads(heads), x)
    assert einops_ops.merge_heads(torch.randn(2, 4, 5, 3)).shape == (2, 5, 12)


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("einops_ops.split_heads")
@pytest.mark.parametrize("num_heads", [5, 0])
def test_split_heads_rejects_a_head_count_that_does_not_divide_the_width(einops_ops, num_heads):
    """split_heads of a width-12 tensor raises ValueError for 5 heads (12 % 5 != 0) and for 0 heads."""
    with pytest.raises(ValueError):
        einops_ops.split_heads(torch.zeros(2, 5, 12), num_heads)


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("einops_ops.attention_scores")
def test_attention_scores_rejects_mismatched_hidden_sizes(einops_ops):
    """attention_scores raises ValueError when q and k have different hidden sizes."""
    with pytest.raises(ValueError):
        einops_ops.attention_scores(torch.zeros(2, 5, 4), torch.zeros(2, 6, 3))
