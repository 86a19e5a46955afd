"""The lecture's network, another correct way: F.linear on the transposed weight, reduce over the layers."""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn


def _size(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    return int(value)


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        dim = _size("dim", dim)
        self.weight = nn.Parameter(torch.randn(dim, dim).div_(math.sqrt(dim)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(F.linear(x, self.weight.t()))


class DeepNetwork(nn.Module):
    def __init__(self, dim: int, num_layers: int) -> None:
        super().__init__()
        dim, num_layers = _size("dim", dim), _size("num_layers", num_layers)
        self.layers = nn.ModuleList([Block(dim) for _ in range(num_layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functools.reduce(lambda h, layer: layer(h), self.layers, x)


def get_num_parameters(model: nn.Module) -> int:
    return sum(map(torch.Tensor.numel, model.parameters()))


def forward_flops(batch_size: int, dim: int, num_layers: int) -> int:
    return 2 * _size("batch_size", batch_size) * _size("dim", dim) ** 2 * _size("num_layers", num_layers)


def backward_flops(batch_size: int, dim: int, num_layers: int) -> int:
    return 2 * forward_flops(batch_size, dim, num_layers)


def activation_bytes(batch_size: int, dim: int, num_layers: int, bytes_per_element: int = 4) -> int:
    elements = _size("batch_size", batch_size) * _size("dim", dim) * (_size("num_layers", num_layers) + 1)
    return elements * _size("bytes_per_element", bytes_per_element)
