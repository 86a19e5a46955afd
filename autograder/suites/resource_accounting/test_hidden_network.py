"""Hidden tests of §7 the deep network: random widths, depths, leading dims, modules and seeds.

Expected values are closed forms, torch's own `parameters()` on the same module built here, seeded
torch.randn, and a float64 forward of the network's formula.
"""

import math
import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.suites.resource_accounting import scenarios

pytestmark = pytest.mark.visibility("hidden")


def chain64(weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """relu(... relu(x @ W1) ... @ WL) in float64."""
    x = x.double()
    for weight in weights:
        x = torch.relu(x @ weight.double())
    return x


def random_weights(rng: random.Random, dim: int, num_layers: int, dtype=torch.float32) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    return [(torch.randn(dim, dim, generator=gen) / math.sqrt(dim)).to(dtype) for _ in range(num_layers)]


def random_input(rng: random.Random, lead: list[int], dim: int, dtype=torch.float32) -> torch.Tensor:
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    return torch.randn(*lead, dim, generator=gen).to(dtype)


def lead_dims(rng: random.Random) -> list[int]:
    return [rng.randint(1, 5) for _ in range(rng.randint(1, 3))]


@pytest.mark.points(1.5)
@pytest.mark.task("network.DeepNetwork")
def test_deep_network_has_d_squared_l_parameters_in_square_blocks_at_random_sizes(student, rng):
    """For 3 random (dim, num_layers): an nn.ModuleList of num_layers blocks, parameters exactly layers.i.weight,
    each a float32 nn.Parameter of shape (dim, dim), and get_num_parameters gives the int dim²·num_layers."""
    for _ in range(3):
        dim, num_layers = rng.randint(1, 40), rng.randint(1, 12)
        got = student.run(scenarios.deep_network_layout, dim=dim, num_layers=num_layers)
        where = f"DeepNetwork({dim}, {num_layers})"
        assert got["module_list"] is True and got["blocks"] == num_layers, \
            f"{where}: layers must be an nn.ModuleList of {num_layers} blocks"
        expected = {f"layers.{i}.weight": [[dim, dim], True, torch.float32] for i in range(num_layers)}
        assert got["parameters"] == expected, f"{where}: parameters {got['parameters']}, expected {expected}"
        assert type(got["count"]) is int and got["count"] == dim * dim * num_layers, f"{where}: count {got['count']!r}"


def random_layers(rng: random.Random, tricky: bool) -> list[dict]:
    kinds = ["linear", "conv", "embedding", "layernorm", "batchnorm", "nested"]
    kinds += ["tied", "frozen"] * 2 if tricky else []
    layers = []
    for kind in rng.choices(kinds, k=rng.randint(3, 6)) + (["tied", "frozen"] if tricky else []):
        layers.append({"kind": kind, "in": rng.randint(1, 9), "out": rng.randint(1, 9), "k": rng.randint(1, 3),
                       "bias": rng.random() < 0.6, "num": rng.randint(2, 30), "dim": rng.randint(1, 9),
                       "affine": rng.random() < 0.6})
    return layers


def parameter_count(seed: int, layers: list[dict]) -> int:
    """What torch itself says: the elements of module.parameters() (shared parameters once, buffers never)."""
    return sum(p.numel() for p in scenarios.module_from_spec(seed, layers).parameters())


@pytest.mark.points(2)
@pytest.mark.task("network.get_num_parameters")
def test_get_num_parameters_of_random_modules(student, rng):
    """For 3 random modules mixing Linear (with and without bias), Conv2d, Embedding, LayerNorm (affine or not),
    BatchNorm1d (whose running statistics are buffers, not parameters) and nested containers,
    get_num_parameters is the int number of elements of module.parameters()."""
    for _ in range(3):
        seed, layers = rng.randrange(2**31), random_layers(rng, tricky=False)
        got = student.run(scenarios.module_parameters, seed=seed, layers=layers)
        expected = parameter_count(seed, layers)
        assert type(got) is int and got == expected, f"{layers}: got {got!r}, expected {expected}"


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.visibility("after_due_date")
@pytest.mark.task("network.get_num_parameters")
def test_get_num_parameters_counts_tied_weights_once_and_frozen_ones_too(student, rng):
    """A random module with an Embedding and a Linear sharing one weight (counted once, as parameters() yields
    it once) and frozen Linear layers (requires_grad False: still parameters) has the count of
    module.parameters()."""
    seed, layers = rng.randrange(2**31), random_layers(rng, tricky=True)
    got = student.run(scenarios.module_parameters, seed=seed, layers=layers)
    expected = parameter_count(seed, layers)
    assert type(got) is int and got == expected, f"{layers}: got {got!r}, expected {expected}"


@pytest.mark.points(1.5)
@pytest.mark.task("network.Block")
def test_block_weight_is_seeded_randn_over_sqrt_dim_at_random_seeds_and_widths(student, trusted, rng):
    """For a random seed and 3 random widths, Block(dim).weight right after torch.manual_seed(seed) is
    torch.randn(dim, dim) / sqrt(dim) in float32 (rtol 1e-6)."""
    seed, dims = rng.randrange(2**31), [rng.randint(1, 70) for _ in range(3)]
    got = student.run(scenarios.block_weights_after_seed, seed=seed, dims=dims)
    assert type(got) is list and len(got) == len(dims), f"malformed result {got!r}"
    for dim, weight in zip(dims, got):
        torch.manual_seed(seed)
        expected = torch.randn(dim, dim) / math.sqrt(dim)
        trusted.assert_tensor(f"Block({dim}).weight after seed {seed}", weight, expected, dtype=torch.float32,
                              rtol=1e-6, atol=1e-7)


@pytest.mark.points(1.5)
@pytest.mark.task("network.Block")
def test_block_forward_is_relu_of_x_at_weight_for_random_leading_dims(student, trusted, rng):
    """For 3 random widths and 1 to 3 leading dims, Block's forward is relu(x @ weight), float32, shape of x
    (compared with float64, rtol 1e-5)."""
    for _ in range(3):
        dim = rng.randint(1, 16)
        weight, x = random_weights(rng, dim, 1)[0], random_input(rng, lead_dims(rng), dim)
        got = student.run(scenarios.block_forward, weight=weight, x=x)
        trusted.assert_tensor(f"Block({dim}) on x of {tuple(x.shape)}", got, chain64([weight], x),
                              dtype=torch.float32, rtol=1e-5, atol=1e-6)


@pytest.mark.points(2)
@pytest.mark.task("network.DeepNetwork")
def test_deep_network_forward_chains_its_blocks_in_order_at_random_depths(student, trusted, rng):
    """For 3 random networks (1 to 8 layers of random width, distinct weights so that the order matters,
    float32 or float64, 1 to 3 leading dims) the forward is relu(· @ W_l) for l = 1..L in order, in the input's
    dtype."""
    for _ in range(3):
        dim, num_layers, dtype = rng.randint(1, 12), rng.randint(1, 8), rng.choice((torch.float32, torch.float64))
        weights, x = random_weights(rng, dim, num_layers, dtype), random_input(rng, lead_dims(rng), dim, dtype)
        got = student.run(scenarios.deep_network_forward, weights=weights, x=x)
        tol = 1e-5 if dtype == torch.float32 else 1e-12
        trusted.assert_tensor(f"DeepNetwork({dim}, {num_layers}) in {dtype} on x of {tuple(x.shape)}", got,
                              chain64(weights, x), dtype=dtype, rtol=tol, atol=tol)


sizes = st.one_of(st.integers(1, 10**5), st.integers(1, 1000).map(float))


@pytest.mark.points(1)
@pytest.mark.task("network.forward_flops")
def test_forward_flops_are_2_b_d_squared_l_at_random_sizes(network, explore):
    """For 30 random sizes (ints, whole floats) forward_flops is the exact int 2·B·D²·L."""

    @explore(30)
    @given(b=sizes, d=sizes, layers=st.integers(1, 200))
    def check(b, d, layers):
        got = network.forward_flops(b, d, layers)
        assert type(got) is int and got == 2 * int(b) * int(d) ** 2 * layers, f"({b}, {d}, {layers}) gave {got!r}"

    check()


@pytest.mark.points(1)
@pytest.mark.task("network.backward_flops")
def test_backward_flops_are_4_b_d_squared_l_at_random_sizes(network, explore):
    """For 30 random sizes backward_flops is the exact int 4·B·D²·L, twice forward_flops."""

    @explore(30)
    @given(b=sizes, d=sizes, layers=st.integers(1, 200))
    def check(b, d, layers):
        got = network.backward_flops(b, d, layers)
        assert type(got) is int and got == 4 * int(b) * int(d) ** 2 * layers, f"({b}, {d}, {layers}) gave {got!r}"

    check()


@pytest.mark.points(1)
@pytest.mark.task("network.activation_bytes")
def test_activation_bytes_are_l_plus_1_b_d_elements_at_random_sizes(network, explore):
    """For 30 random sizes and element widths (1, 2, 4, 8 bytes) activation_bytes is the int (L + 1)·B·D·bytes."""

    @explore(30)
    @given(b=sizes, d=sizes, layers=st.integers(1, 200), width=st.sampled_from((1, 2, 4, 8)))
    def check(b, d, layers, width):
        got = network.activation_bytes(b, d, layers, bytes_per_element=width)
        assert type(got) is int and got == (layers + 1) * int(b) * int(d) * width, \
            f"({b}, {d}, {layers}, {width}) gave {got!r}"

    check()


@pytest.mark.points(2.5)
@pytest.mark.task("network.activation_bytes")
def test_activation_bytes_agrees_with_saved_activation_bytes_at_random_sizes_and_dtypes(student, rng):
    """For 3 random DeepNetworks (float32, float64 or bfloat16; 1 to 3 leading dims; input with or without
    grad) saved_activation_bytes of the forward and activation_bytes(rows, dim, L, element size) both equal
    (L + 1)·rows·dim·element size, where rows is the product of the leading dims."""
    for _ in range(3):
        lead, dim, num_layers = lead_dims(rng), rng.randint(1, 12), rng.randint(1, 10)
        dtype = rng.choice((torch.float32, torch.float64, torch.bfloat16))
        got = student.run(scenarios.deep_network_saved, seed=rng.randrange(2**31), lead=lead, dim=dim,
                          num_layers=num_layers, dtype=dtype, input_grad=rng.random() < 0.5)
        expected = (num_layers + 1) * math.prod(lead) * dim * torch.finfo(dtype).bits // 8
        where = f"DeepNetwork({dim}, {num_layers}) in {dtype} on x of {(*lead, dim)}"
        assert got["measured"] == expected, \
            f"{where}: saved_activation_bytes measured {got['measured']}, expected {expected}"
        assert got["formula"] == expected, f"{where}: activation_bytes gave {got['formula']}, expected {expected}"


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.parametrize("function", [pytest.param(f, marks=pytest.mark.task(f"network.{f}"))
                                      for f in ("forward_flops", "backward_flops", "activation_bytes")])
def test_network_formulas_reject_random_invalid_sizes(network, rng, function):
    """Each size in turn set to 0 or a random negative number raises ValueError whose message names it."""
    for index, name in enumerate(("batch_size", "dim", "num_layers")):
        args = [rng.randint(1, 512) for _ in range(3)]
        args[index] = rng.choice((0, -rng.randint(1, 10**6)))
        with pytest.raises(ValueError, match=name):
            getattr(network, function)(*args)
            pytest.fail(f"no ValueError for {function}{tuple(args)}")


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("network.DeepNetwork")
def test_deep_network_rejects_random_invalid_sizes(student, rng):
    """DeepNetwork(dim, num_layers) raises ValueError for a dim, then a num_layers, of 0 or a random negative number."""
    for args in ([rng.choice((0, -rng.randint(1, 100))), rng.randint(1, 4)],
                 [rng.randint(1, 8), rng.choice((0, -rng.randint(1, 100)))]):
        with pytest.raises(ValueError):
            student.run(scenarios.build_deep_network, dim=args[0], num_layers=args[1])
            pytest.fail(f"no ValueError for DeepNetwork{tuple(args)}")
