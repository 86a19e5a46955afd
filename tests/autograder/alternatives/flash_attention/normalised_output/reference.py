"""Alternative reference attention: einsum and a hand-written, max-shifted softmax."""

from __future__ import annotations

import torch


def check_attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> None:
    """ValueError unless q, k, v follow the input contract (handout §3)."""
    problems = []
    if min(q.dim(), k.dim(), v.dim()) < 2:
        problems.append("q, k and v need at least 2 dims (..., seq, d)")
    elif k.shape != v.shape or q.shape[:-2] + q.shape[-1:] != k.shape[:-2] + k.shape[-1:]:
        problems.append(f"shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)} do not match")
    if len({q.dtype, k.dtype, v.dtype}) > 1 or len({q.device, k.device, v.device}) > 1:
        problems.append("q, k and v need one dtype and one device")
    if is_causal and not problems and q.shape[-2] != k.shape[-2]:
        problems.append("causal attention needs n_queries == n_keys")
    if problems:
        raise ValueError("; ".join(problems))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    """softmax(q kᵀ / sqrt(d)) v, the softmax written out: exp(s - rowmax) / rowsum."""
    check_attention_inputs(q, k, v, is_causal)
    scores = torch.einsum("...id,...jd->...ij", q, k) * q.shape[-1] ** -0.5
    if is_causal:
        n = q.shape[-2]
        visible = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        scores = torch.where(visible, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=q.device))
    weights = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    return torch.einsum("...ij,...jd->...id", weights / weights.sum(dim=-1, keepdim=True), v)
