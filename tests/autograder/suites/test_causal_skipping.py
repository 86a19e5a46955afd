"""Causal tiles skipped in every kernel (issue 29, part 3): the handout (§8, §9) asks each kernel of
flash_triton.py to skip the tiles past the diagonal, not to load and mask them. The hidden suite counts
the tl.dot calls per program under the interpreter for the forward
(`test_triton_causal_forward_skips_the_tiles_above_the_diagonal`) and for each backward kernel
(`test_triton_causal_backward_skips_the_tiles_above_the_diagonal`).

A planted mistake per backward kernel (its causal loop runs over every tile, masked) gives the right
gradients and loses exactly the backward skipping test; the reference keeps it (the whole hidden suite
on the reference and on the alternatives: tests/autograder/suites/test_suites_flash_attention.py).
"""

from __future__ import annotations

import pytest

from tests.autograder.suites.test_suites_flash_attention import SOLUTION, SUITE, build_tree, not_passed, outcomes

SKIPPING = "test_triton_causal_backward_skips_the_tiles_above_the_diagonal"

# kernel: (text of the reference's flash_triton.py, its replacement: the same kernel visiting every tile)
MASKS_EVERY_TILE = {
    "dK/dV kernel": ("        first = (k_start // Q_TILE) * Q_TILE  # query tiles before it end before this tile's "
                     "first key\n", "        first = 0\n"),
    "dQ kernel": ("dq = _dq_key_loop(dq, q, do, lse, delta, K, V, rows, below, tl.minimum(q_start + Q_TILE, n_keys), "
                  "n_keys,", "dq = _dq_key_loop(dq, q, do, lse, delta, K, V, rows, below, n_keys, n_keys,"),
}


def test_the_reference_skips_in_every_backward_kernel(tmp_path):
    """The reference passes both skipping tests (its three backward kernels, one without tl.dot)."""
    found = outcomes(build_tree(tmp_path, {}), tmp_path, f"{SUITE}/test_flash_triton.py", "-k", "causal")
    assert not_passed(found) == {} and len(found) == 2, found


@pytest.mark.parametrize("kernel", sorted(MASKS_EVERY_TILE))
def test_a_backward_kernel_that_masks_every_tile_loses_the_skipping_points(tmp_path, kernel):
    """The kernel's causal loop runs over every tile with the mask: the gradients stay right (every other
    Triton test passes), the backward skipping test alone fails, naming the tiles."""
    right, wrong = MASKS_EVERY_TILE[kernel]
    text = (SOLUTION / "flash_triton.py").read_text()
    assert text.count(right) == 1, f"the solution's flash_triton.py changed: update the edit of {right!r}"
    found = outcomes(build_tree(tmp_path, {"flash_triton.py": text.replace(right, wrong)}), tmp_path,
                     f"{SUITE}/test_flash_triton.py")
    failed = {name.partition("::")[2] for name, outcome in not_passed(found).items() if outcome == "failed"}
    assert failed == {SKIPPING}, f"unexpected outcomes: {not_passed(found)}"
