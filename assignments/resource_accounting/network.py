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
        raise NotImplementedError('Block.__init__ in resource_accounting/network.py is not implemented yet: write it (handout §7 A deep network)')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError('Block.forward in resource_accounting/network.py is not implemented yet: write it (handout §7 A deep network)')


class DeepNetwork(nn.Module):
    """`num_layers` Blocks of width `dim` applied in order, held in `self.layers` (an nn.ModuleList).

    Handout: §7 A deep network
    """

    def __init__(self, dim: int, num_layers: int) -> None:
        super().__init__()
        raise NotImplementedError('DeepNetwork.__init__ in resource_accounting/network.py is not implemented yet: write it (handout §7 A deep network)')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError('DeepNetwork.forward in resource_accounting/network.py is not implemented yet: write it (handout §7 A deep network)')


def get_num_parameters(model: nn.Module) -> int:
    """The number of scalar parameters (elements, not tensors) of any nn.Module.

    Handout: §7 A deep network
    """
    raise NotImplementedError('get_num_parameters in resource_accounting/network.py is not implemented yet: write it (handout §7 A deep network)')


def forward_flops(batch_size: int, dim: int, num_layers: int) -> int:
    """2·B·D²·L: one (B, D) @ (D, D) matmul per layer.

    Handout: §7 A deep network
    """
    raise NotImplementedError('forward_flops in resource_accounting/network.py is not implemented yet: write it (handout §7 A deep network)')


def backward_flops(batch_size: int, dim: int, num_layers: int) -> int:
    """4·B·D²·L: per layer, one matmul for the weight's gradient and one for the input's.

    Handout: §7 A deep network
    """
    raise NotImplementedError('backward_flops in resource_accounting/network.py is not implemented yet: write it (handout §7 A deep network)')


def activation_bytes(batch_size: int, dim: int, num_layers: int, bytes_per_element: int = 4) -> int:
    """Bytes DeepNetwork saves for backward: the input and each layer's ReLU output, (L + 1)·B·D elements.

    Handout: §7 A deep network
    """
    raise NotImplementedError('activation_bytes in resource_accounting/network.py is not implemented yet: write it (handout §7 A deep network)')
