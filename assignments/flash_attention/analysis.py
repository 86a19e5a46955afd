"""FLOPs and HBM bytes of attention: what the benchmark's TFLOP/s mean and why tiling pays.

Conventions (handout §4 Counting FLOPs and HBM bytes):
- FLOPs: the two matmuls of the forward, S = Q Kᵀ and O = P V, each 2·Nq·Nk·D per head, so
  4·B·H·Nq·Nk·D; halved when causal; the backward counted as 2.5 times the forward (FlashAttention-2
  paper and Triton's fused-attention tutorial). Softmax FLOPs are not counted.
- Bytes: the forward only, not causal, every tensor read or written once per kernel that uses it,
  no cache reuse between kernels or between programs (the rule is spelled out in the handout).
"""

from __future__ import annotations


def _check_sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        if type(value) is not int or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def attention_flops(batch: int, heads: int, n_queries: int, n_keys: int, head_dim: int,
                    is_causal: bool = False, backward: bool = False) -> float:
    """FLOPs of attention's forward (backward=False) or of its backward alone (backward=True).

    Forward 4·B·H·Nq·Nk·D, halved when causal (which needs Nq == Nk); backward 2.5x the forward.

    Handout: §4 Counting FLOPs and HBM bytes
    """
    raise NotImplementedError('attention_flops in flash_attention/analysis.py is not implemented yet: write it (handout §4 Counting FLOPs and HBM bytes)')


def naive_attention_hbm_bytes(batch: int, heads: int, n_queries: int, n_keys: int, head_dim: int,
                              bytes_per_element: int = 2) -> int:
    """HBM bytes of the naive forward: three kernels, S = Q Kᵀ, P = softmax(S), O = P V.

    Each kernel reads its inputs from HBM and writes its output there, in the inputs' dtype:
    Q, K (read) and S (write); S (read) and P (write); P, V (read) and O (write). Per head that is
    (2·Nq·D + 2·Nk·D + 4·Nq·Nk) elements.

    Handout: §4 Counting FLOPs and HBM bytes
    """
    raise NotImplementedError('naive_attention_hbm_bytes in flash_attention/analysis.py is not implemented yet: write it (handout §4 Counting FLOPs and HBM bytes)')


def flash_attention_hbm_bytes(batch: int, heads: int, n_queries: int, n_keys: int, head_dim: int,
                              q_tile: int, bytes_per_element: int = 2) -> int:
    """HBM bytes of the tiled FlashAttention forward with `q_tile` query rows per program.

    Each of the T = ceil(Nq / q_tile) programs of a head reads its Q tile once, reads all of K and V,
    writes its O tile in the inputs' dtype and its lse rows in float32 (4 bytes). Per head:
    (2·Nq·D + 2·T·Nk·D)·bytes_per_element + 4·Nq bytes.

    Handout: §4 Counting FLOPs and HBM bytes
    """
    raise NotImplementedError('flash_attention_hbm_bytes in flash_attention/analysis.py is not implemented yet: write it (handout §4 Counting FLOPs and HBM bytes)')
