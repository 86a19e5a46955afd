"""Hidden: analysis.py at random sizes, against the closed forms and the handout's counting rule (§4).

Sizes come from hypothesis, seeded with the run's seed (no example database, no shrinking: each
example is a call into the student's code). The byte counts are also derived on this side by walking
the handout's rule kernel by kernel and program by program, independently of the closed forms.
"""

import math

import hypothesis
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.visibility("hidden")

ANALYSIS = "flash_attention.analysis"
EXAMPLES = dict(max_examples=25, deadline=None, database=None, derandomize=False,
                phases=(Phase.explicit, Phase.generate), suppress_health_check=list(hypothesis.HealthCheck))

SIZES = st.fixed_dictionaries({
    "batch": st.integers(1, 64), "heads": st.integers(1, 64), "n_queries": st.integers(1, 70000),
    "n_keys": st.integers(1, 70000), "head_dim": st.integers(1, 256)})


def run(seed: int, strategy, check) -> None:
    """Run check on hypothesis draws from strategy, seeded with this run's seed."""
    hypothesis.seed(seed)(settings(**EXAMPLES)(given(strategy)(check)))()


def naive_bytes_by_the_rule(batch, heads, n_queries, n_keys, head_dim, bytes_per_element) -> int:
    """The handout's three-kernel table, summed kernel by kernel: (reads, writes) in elements per head."""
    kernels = {
        "S = Q K^T": ([n_queries * head_dim, n_keys * head_dim], [n_queries * n_keys]),
        "P = softmax(S)": ([n_queries * n_keys], [n_queries * n_keys]),
        "O = P V": ([n_queries * n_keys, n_keys * head_dim], [n_queries * head_dim]),
    }
    elements = sum(sum(reads) + sum(writes) for reads, writes in kernels.values())
    return batch * heads * elements * bytes_per_element


def flash_bytes_by_the_rule(batch, heads, n_queries, n_keys, head_dim, q_tile, bytes_per_element) -> int:
    """The handout's rule walked program by program: each reads its Q rows and all of K and V, and writes
    its O rows (input dtype) and its lse rows (float32)."""
    per_head = 0
    for start in range(0, n_queries, q_tile):
        rows = min(q_tile, n_queries - start)
        per_head += (rows * head_dim + 2 * n_keys * head_dim + rows * head_dim) * bytes_per_element + 4 * rows
    return batch * heads * per_head


@pytest.mark.points(2)
@pytest.mark.task("analysis.attention_flops")
def test_attention_flops_at_random_sizes(student, seed):
    """attention_flops returns a float equal (to 1e-12 relative) to 4·B·H·Nq·Nk·D, halved when causal, times
    2.5 for backward=True, at random sizes and flags."""
    analysis = student.module(ANALYSIS)
    flags = st.fixed_dictionaries({"is_causal": st.booleans(), "backward": st.booleans()})

    def check(draw):
        sizes, options = draw
        if options["is_causal"]:
            sizes = sizes | {"n_keys": sizes["n_queries"]}
        expected = 4 * math.prod(sizes.values()) / (2 if options["is_causal"] else 1) * (2.5 if options["backward"]
                                                                                         else 1)
        got = analysis.attention_flops(**sizes, **options)
        assert type(got) is float, f"attention_flops{sizes, options} returned a {type(got).__name__}, not a float"
        assert math.isclose(got, expected, rel_tol=1e-12), f"attention_flops({sizes}, {options}) = {got}, " \
                                                           f"expected {expected}"

    run(seed, st.tuples(SIZES, flags), check)


@pytest.mark.points(2)
@pytest.mark.task("analysis.naive_attention_hbm_bytes")
def test_naive_bytes_follow_the_counting_rule_at_random_sizes(student, seed):
    """naive_attention_hbm_bytes is the exact int the handout's three-kernel table gives, at random sizes
    and bytes_per_element 1, 2, 4 or 8."""
    analysis = student.module(ANALYSIS)

    def check(draw):
        sizes, element = draw
        expected = naive_bytes_by_the_rule(**sizes, bytes_per_element=element)
        got = analysis.naive_attention_hbm_bytes(**sizes, bytes_per_element=element)
        assert type(got) is int, f"naive_attention_hbm_bytes returned a {type(got).__name__}, not an int"
        assert got == expected, f"naive_attention_hbm_bytes({sizes}, bytes_per_element={element}) = {got}, " \
                                f"expected {expected}"

    run(seed, st.tuples(SIZES, st.sampled_from((1, 2, 4, 8))), check)


@pytest.mark.points(2)
@pytest.mark.task("analysis.flash_attention_hbm_bytes")
def test_flash_bytes_follow_the_counting_rule_at_random_tiles(student, seed):
    """flash_attention_hbm_bytes is the exact int the handout's rule gives program by program, at random
    sizes, any q_tile (ragged last tiles, tiles longer than the sequence) and bytes_per_element 1 to 8;
    the lse is always 4 bytes per row."""
    analysis = student.module(ANALYSIS)
    sizes = st.fixed_dictionaries({
        "batch": st.integers(1, 16), "heads": st.integers(1, 32), "n_queries": st.integers(1, 5000),
        "n_keys": st.integers(1, 70000), "head_dim": st.integers(1, 256)})

    def check(draw):
        sizes, q_tile, element = draw
        expected = flash_bytes_by_the_rule(**sizes, q_tile=q_tile, bytes_per_element=element)
        got = analysis.flash_attention_hbm_bytes(**sizes, q_tile=q_tile, bytes_per_element=element)
        assert type(got) is int, f"flash_attention_hbm_bytes returned a {type(got).__name__}, not an int"
        assert got == expected, f"flash_attention_hbm_bytes({sizes}, q_tile={q_tile}, bytes_per_element=" \
                                f"{element}) = {got}, expected {expected}"

    run(seed, st.tuples(sizes, st.integers(1, 6000), st.sampled_from((1, 2, 4, 8))), check)


@pytest.mark.points(1)
@pytest.mark.visibility("after_due_date")
@pytest.mark.task("analysis.flash_attention_hbm_bytes")
def test_byte_counts_stay_exact_beyond_two_to_the_53(student, rng):
    """Both byte counts are exact ints at random sizes whose counts exceed 2**53 (where a float loses units):
    computed in int arithmetic, not through floats."""
    analysis = student.module(ANALYSIS)
    for _ in range(3):
        sizes = dict(batch=rng.randint(512, 2048), heads=rng.randint(64, 128), n_queries=rng.randint(2**20, 2**22),
                     n_keys=rng.randint(2**20, 2**22), head_dim=rng.randint(65, 255))
        q_tile, element = rng.randint(3, 999), rng.choice((2, 4))
        tiles = -(-sizes["n_queries"] // q_tile)
        b, h, nq, nk, d = sizes.values()
        naive = b * h * (2 * nq * d + 2 * nk * d + 4 * nq * nk) * element
        flash = b * h * ((2 * nq * d + 2 * tiles * nk * d) * element + 4 * nq)
        assert min(naive, flash) > 2**53
        got = analysis.naive_attention_hbm_bytes(**sizes, bytes_per_element=element)
        assert got == naive and type(got) is int, f"naive_attention_hbm_bytes({sizes}) = {got!r}, expected {naive}"
        got = analysis.flash_attention_hbm_bytes(**sizes, q_tile=q_tile, bytes_per_element=element)
        assert got == flash and type(got) is int, \
            f"flash_attention_hbm_bytes({sizes}, q_tile={q_tile}) = {got!r}, expected {flash}"


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("analysis.attention_flops")
def test_counts_reject_random_bad_sizes(student, trusted, rng):
    """Each count raises ValueError for every size (q_tile included) made bad in each of three ways: zero, a
    random negative, a random whole float; and attention_flops for causal with random n_queries != n_keys."""
    analysis = student.module(ANALYSIS)
    names = ("batch", "heads", "n_queries", "n_keys", "head_dim")
    for name in names:
        for bad in (0, -rng.randint(1, 99), float(rng.randint(1, 64))):
            sizes = {n: rng.randint(1, 64) for n in names} | {name: bad}
            what = f"{sizes}"
            trusted.value_error(f"attention_flops({what})", lambda: analysis.attention_flops(**sizes))
            trusted.value_error(f"naive_attention_hbm_bytes({what})",
                                lambda: analysis.naive_attention_hbm_bytes(**sizes))
            trusted.value_error(f"flash_attention_hbm_bytes({what})",
                                lambda: analysis.flash_attention_hbm_bytes(**sizes, q_tile=16))
    for q_tile in (0, -rng.randint(1, 128), float(rng.randint(1, 128))):
        trusted.value_error(f"flash_attention_hbm_bytes(q_tile={q_tile!r})",
                            lambda: analysis.flash_attention_hbm_bytes(1, 2, 64, 64, 16, q_tile))
    n_queries = rng.randint(1, 4096)
    n_keys = n_queries + rng.randint(1, 4096)
    trusted.value_error(f"attention_flops causal with n_queries {n_queries} != n_keys {n_keys}",
                        lambda: analysis.attention_flops(1, 2, n_queries, n_keys, 64, is_causal=True))
