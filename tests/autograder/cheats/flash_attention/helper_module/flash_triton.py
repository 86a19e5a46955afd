"""A cheat: the attention is in another module of the package, which flash_triton imports."""

import kernels  # noqa: F401
import triton
import triton.language as tl

from flash_attention import _math
from flash_attention._math import scaled_scores


@triton.jit
def _touch(X):
    tl.program_id(0)


def flash_forward_triton(q, k, v, is_causal=False, q_tile=None, k_tile=None):
    _touch[(1,)](q)
    s = scaled_scores(q, k)
    return _math.mix(s, v), _math.row_lse(s)
