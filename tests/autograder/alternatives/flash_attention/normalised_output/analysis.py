"""Alternative counts: exact integer arithmetic throughout, a float only at the end of the FLOPs."""

from __future__ import annotations


def _positive_ints(*values) -> None:
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"sizes must be positive ints, got {value!r}")


def attention_flops(batch: int, heads: int, n_queries: int, n_keys: int, head_dim: int,
                    is_causal: bool = False, backward: bool = False) -> float:
    """2 matmuls of 2·Nq·Nk·D per head; causal halves it; the backward alone is 5/2 of the forward."""
    _positive_ints(batch, heads, n_queries, n_keys, head_dim)
    if is_causal and n_queries != n_keys:
        raise ValueError("causal attention needs n_queries == n_keys")
    units = batch * heads * n_queries * n_keys * head_dim  # the forward is 4 units, exactly
    forward = 2 * units if is_causal else 4 * units
    return float(forward * 5 // 2 if backward else forward)


def naive_attention_hbm_bytes(batch: int, heads: int, n_queries: int, n_keys: int, head_dim: int,
                              bytes_per_element: int = 2) -> int:
    """Three kernels, each reading its inputs and writing its output once."""
    _positive_ints(batch, heads, n_queries, n_keys, head_dim, bytes_per_element)
    scores, q, kv = n_queries * n_keys, n_queries * head_dim, n_keys * head_dim
    per_kernel = [q + kv + scores, scores + scores, scores + kv + q]
    return batch * heads * sum(per_kernel) * bytes_per_element


def flash_attention_hbm_bytes(batch: int, heads: int, n_queries: int, n_keys: int, head_dim: int,
                              q_tile: int, bytes_per_element: int = 2) -> int:
    """Each query tile's program reads Q rows, all of K and V, writes O rows and float32 lse rows."""
    _positive_ints(batch, heads, n_queries, n_keys, head_dim, q_tile, bytes_per_element)
    programs = (n_queries + q_tile - 1) // q_tile
    elements = 2 * n_queries * head_dim + programs * 2 * n_keys * head_dim
    return batch * heads * (elements * bytes_per_element + 4 * n_queries)
