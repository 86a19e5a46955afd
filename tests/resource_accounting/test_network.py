"""§7 A deep network: Block, DeepNetwork, parameter counts, FLOPs and activation bytes."""

import math

import pytest
import torch

from tests.resource_accounting import scenarios


def deep_network_reference(weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """relu(... relu(x @ W1) ... @ WL) in float64."""
    h = x.double()
    for weight in weights:
        h = torch.relu(h @ weight.double())
    return h


@pytest.mark.points(1)
@pytest.mark.task("network.DeepNetwork")
def test_deep_network_8_by_3_has_192_parameters_in_three_square_blocks(student):
    """DeepNetwork(dim=8, num_layers=3) has 8·8·3 = 192 parameters: layers.0.weight to layers.2.weight, each (8, 8).

    Hint: self.layers = nn.ModuleList(...) of Blocks, each with one nn.Parameter named weight.
    """
    got = student.run(scenarios.deep_network_parameters, dim=8, num_layers=3)
    assert got["parameters"] == {f"layers.{i}.weight": [8, 8] for i in range(3)}
    assert got["layers_is_module_list"] is True, "self.layers must be an nn.ModuleList"
    assert type(got["count"]) is int and got["count"] == 192


@pytest.mark.points(1)
@pytest.mark.task("network.get_num_parameters")
def test_get_num_parameters_counts_elements_of_any_module(student):
    """get_num_parameters counts scalars, biases included: Linear(5, 3) + Linear(3, 2, no bias) has 15 + 3 + 6 = 24."""
    assert student.run(scenarios.torch_module_parameters, sizes=[[5, 3, 1], [3, 2, 0]]) == 24


@pytest.mark.points(1)
@pytest.mark.task("network.Block")
def test_block_weight_is_randn_over_sqrt_dim(student):
    """Right after torch.manual_seed(s), Block(dim).weight is torch.randn(dim, dim) / sqrt(dim).

    Hint (scale): divide the draw by math.sqrt(dim), once: the weight is a constant factor off.
    Hint (values, shape): draw exactly one torch.randn(dim, dim) in __init__, before any other random call, so
    that the seed gives the expected numbers.
    """
    got = student.run(scenarios.block_initial_weight, seed=3, dim=64)
    torch.manual_seed(3)
    expected = torch.randn(64, 64) / math.sqrt(64)
    assert got.shape == (64, 64) and got.dtype == torch.float32
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.points(2)
@pytest.mark.task("network.DeepNetwork")
def test_deep_network_forward_chains_relu_of_matmul_blocks(student):
    """DeepNetwork(x) is relu(x @ W1), then relu(· @ W2), ... in layer order, for (batch, dim) and
    (b, s, dim) input."""
    torch.manual_seed(0)
    weights = [torch.randn(6, 6) / math.sqrt(6) for _ in range(3)]
    for x in (torch.randn(4, 6), torch.randn(2, 3, 6)):
        got = student.run(scenarios.deep_network_forward, weights=weights, x=x)
        assert got.shape == x.shape and got.dtype == torch.float32
        torch.testing.assert_close(got.double(), deep_network_reference(weights, x), rtol=1e-5, atol=1e-6)


@pytest.mark.points(1)
@pytest.mark.task("network.forward_flops")
def test_forward_flops_are_2_b_d_squared_l(network):
    """With B = 1024, D = 256, one layer: 2·1024·256² = 134,217,728 forward FLOPs (an int); 3 layers: three
    times it."""
    got = network.forward_flops(1024, 256, 1)
    assert type(got) is int and got == 134_217_728
    assert network.forward_flops(1024, 256, 3) == 3 * 134_217_728


@pytest.mark.points(1)
@pytest.mark.task("network.backward_flops")
def test_backward_flops_are_4_b_d_squared_l(network):
    """With B = 1024, D = 256, one layer: 4·1024·256² = 268,435,456 backward FLOPs, twice the forward."""
    got = network.backward_flops(1024, 256, 1)
    assert type(got) is int and got == 268_435_456
    assert network.backward_flops(8, 16, 5) == 4 * 8 * 16**2 * 5


@pytest.mark.points(1)
@pytest.mark.task("network.activation_bytes")
def test_activation_bytes_count_the_input_and_each_relu_output(network):
    """activation_bytes is (L + 1)·B·D elements × bytes: 17·4·8·4 = 2176 for L = 16, B = 4, D = 8 in fp32."""
    got = network.activation_bytes(4, 8, 16)
    assert type(got) is int and got == 17 * 4 * 8 * 4
    assert network.activation_bytes(4, 8, 16, bytes_per_element=2) == 17 * 4 * 8 * 2


@pytest.mark.points(2)
@pytest.mark.task("network.activation_bytes")
def test_activation_bytes_agrees_with_saved_activation_bytes_on_a_deep_network(student):
    """Measured with saved_activation_bytes, a DeepNetwork(16, 5) forward on 3 rows saves (5 + 1)·3·16·4 bytes,
    and activation_bytes(3, 16, 5) says the same.

    Hint ("activation_bytes gave"): the lecture's 2·B·D per layer counts each ReLU output twice (it is also the
    next matmul's input).
    Hint ("saved_activation_bytes measured"): this is saved_activation_bytes's answer (§8): its own tests must
    pass first.
    """
    got = student.run(scenarios.saved_bytes_deep_network, seed=0, batch=3, dim=16, num_layers=5)
    expected = (5 + 1) * 3 * 16 * 4
    assert got["measured"] == expected, f"saved_activation_bytes measured {got['measured']}, expected {expected}"
    assert got["formula"] == expected, f"activation_bytes gave {got['formula']}, expected {expected}"


def invalid(function, *args, names):
    """One invalid-argument case, tagged with the contract item it exercises."""
    return pytest.param(function, args, names, marks=pytest.mark.task(f"network.{function}"), id=f"{function}{args}")


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.parametrize("function, args, names", [
    invalid("forward_flops", -1, 8, 3, names="batch_size"),
    invalid("backward_flops", 4, 0, 3, names="dim"),
    invalid("activation_bytes", 4, 8, -1, names="num_layers"),
])
def test_network_formulas_reject_invalid_sizes(network, function, args, names):
    """A size below 1 raises ValueError naming the argument."""
    with pytest.raises(ValueError, match=names):
        getattr(network, function)(*args)


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("network.DeepNetwork")
@pytest.mark.parametrize("dim, num_layers", [(0, 3), (8, -1)])
def test_deep_network_rejects_invalid_sizes(student, dim, num_layers):
    """DeepNetwork(dim, num_layers) raises ValueError unless both are at least 1."""
    with pytest.raises(ValueError):
        student.run(scenarios.build_deep_network, dim=dim, num_layers=num_layers)
