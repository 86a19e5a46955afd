"""The lecture's toy network: L square matmul+ReLU blocks, and what it costs in FLOPs and bytes.

    model = DeepNetwork(dim=8, num_layers=3)     # 3 blocks, 8·8·3 = 192 parameters
    y = model(x)                                 # x: (..., dim) float32

Counting conventions (B = batch size, D = dim, L = num_layers): forward 2·B·D²·L FLOPs, backward
4·B·D²·L (ReLU is free), saved activations (L + 1)·B·D elements.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def _count(name: str, value, minimum: int = 0) -> int:
    """`value` as an int when it is a whole number >= minimum, else a ValueError that says so."""
    whole = type(value) is int or (type(value) is float and math.isfinite(value) and value.is_integer())
    if not whole or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def _sizes(batch_size, dim, num_layers) -> tuple[int, int, int]:
    """The three sizes as ints, each checked to be a whole number >= 1."""
    return _count("batch_size", batch_size, 1), _count("dim", dim, 1), _count("num_layers", num_layers, 1)


class Block(nn.Module):
    """`relu(x @ weight)` with one parameter `weight` of shape (dim, dim), initialised randn / sqrt(dim).

    The 1/sqrt(dim) keeps each output feature's variance near its input's, however wide the layer.

    Handout: §7 A deep network
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        ### BEGIN SOLUTION
        dim = _count("dim", dim, 1)
        self.weight = nn.Parameter(torch.randn(dim, dim) / math.sqrt(dim))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return torch.relu(x @ self.weight)
        ### END SOLUTION


class DeepNetwork(nn.Module):
    """`num_layers` Blocks of width `dim` applied in order, held in `self.layers` (an nn.ModuleList).

    Handout: §7 A deep network
    """

    def __init__(self, dim: int, num_layers: int) -> None:
        super().__init__()
        ### BEGIN SOLUTION
        dim, num_layers = _count("dim", dim, 1), _count("num_layers", num_layers, 1)
        self.layers = nn.ModuleList(Block(dim) for _ in range(num_layers))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        for layer in self.layers:
            x = layer(x)
        return x
        ### END SOLUTION


def get_num_parameters(model: nn.Module) -> int:
    """The number of scalar parameters (elements, not tensors) of any nn.Module.

    Handout: §7 A deep network
    """
    ### BEGIN SOLUTION
    return sum(p.numel() for p in model.parameters())
    ### END SOLUTION


def forward_flops(batch_size: int, dim: int, num_layers: int) -> int:
    """2·B·D²·L: one (B, D) @ (D, D) matmul per layer.

    Handout: §7 A deep network
    """
    ### BEGIN SOLUTION
    batch_size, dim, num_layers = _sizes(batch_size, dim, num_layers)
    return 2 * batch_size * dim * dim * num_layers
    ### END SOLUTION


def backward_flops(batch_size: int, dim: int, num_layers: int) -> int:
    """4·B·D²·L: per layer, one matmul for the weight's gradient and one for the input's.

    Handout: §7 A deep network
    """
    ### BEGIN SOLUTION
    batch_size, dim, num_layers = _sizes(batch_size, dim, num_layers)
    # The gradient of x @ W needs grad @ Wᵀ (for x) and xᵀ @ grad (for W): two forward-sized matmuls.
    return 4 * batch_size * dim * dim * num_layers
    ### END SOLUTION


def activation_bytes(batch_size: int, dim: int, num_layers: int, bytes_per_element: int = 4) -> int:
    """Bytes DeepNetwork saves for backward: the input and each layer's ReLU output, (L + 1)·B·D elements.

    Handout: §7 A deep network
    """
    ### BEGIN SOLUTION
    # Layer l's ReLU output is layer l+1's matmul input: one storage, saved once, so per layer only
    # the ReLU output is new; the network's own input comes on top.
    batch_size, dim, num_layers = _sizes(batch_size, dim, num_layers)
    return (num_layers + 1) * batch_size * dim * _count("bytes_per_element", bytes_per_element, 1)
    ### END SOLUTION
