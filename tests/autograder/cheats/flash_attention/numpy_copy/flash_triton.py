"""Not malicious, and still not Triton's work: numpy computes the attention on the host, and a Triton
kernel copies the result into the output tensors."""

import kernels  # noqa: F401
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(SRC, DST, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(DST + offsets, tl.load(SRC + offsets, mask=offsets < n), mask=offsets < n)


def _copied(host):
    out = torch.empty_like(host)
    _copy[(triton.cdiv(host.numel(), 256),)](host, out, host.numel(), BLOCK=256)
    return out


def flash_forward_triton(q, k, v, is_causal=False, q_tile=None, k_tile=None):
    qn, kn, vn = (x.detach().cpu().double().numpy() for x in (q, k, v))
    s = qn @ np.swapaxes(kn, -1, -2) / np.sqrt(qn.shape[-1])
    if is_causal:
        s = np.where(np.triu(np.ones(s.shape[-2:]), 1) > 0, -np.inf, s)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    o = torch.from_numpy((p / l) @ vn).to(q.dtype).contiguous()
    lse = torch.from_numpy((m + np.log(l))[..., 0]).float().contiguous()
    return _copied(o), _copied(lse)
