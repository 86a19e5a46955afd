"""Training-time memory, another correct way: checkpoint_sequential, weighted micro-batches, storages in a list."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential

from resource_accounting.network import DeepNetwork


def _is_parameter(tensor: torch.Tensor) -> bool:
    return isinstance(tensor, nn.Parameter) or isinstance(tensor._base, nn.Parameter)


def saved_activation_bytes(fn, *args) -> int:
    """Keep every saved non-parameter tensor, then add up the sizes of their distinct storages."""
    kept: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        if not _is_parameter(tensor):
            kept.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn(*args)
    sizes = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in kept}
    return sum(sizes.values())


def accumulated_train_step(model: nn.Module, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
                           targets: torch.Tensor, loss_fn, num_micro_batches: int) -> float:
    """Each micro-batch's mean loss weighted by its share of the batch; one step at the end."""
    if isinstance(num_micro_batches, bool) or not isinstance(num_micro_batches, int) or num_micro_batches <= 0:
        raise ValueError(f"num_micro_batches must be a positive int, got {num_micro_batches!r}")
    if inputs.ndim == 0 or len(inputs) % num_micro_batches or len(targets) != len(inputs):
        raise ValueError(f"cannot split {tuple(inputs.shape)} inputs and {tuple(targets.shape)} targets into "
                         f"{num_micro_batches} equal micro-batches")
    model.zero_grad(set_to_none=True)
    total = torch.zeros((), dtype=torch.float64)
    for x, y in zip(inputs.chunk(num_micro_batches), targets.chunk(num_micro_batches)):
        loss = loss_fn(model(x), y) * (len(x) / len(inputs))
        loss.backward()
        total += loss.detach().double()
    optimizer.step()
    return float(total)


def checkpointed_forward(model: DeepNetwork, x: torch.Tensor, num_segments: int) -> torch.Tensor:
    """torch's checkpoint_sequential: every segment but the last is checkpointed (the handout allows it)."""
    if isinstance(num_segments, bool) or not isinstance(num_segments, int) or not 0 < num_segments <= len(model.layers):
        raise ValueError(f"num_segments must be in 1..{len(model.layers)}, got {num_segments!r}")
    return checkpoint_sequential(model.layers, num_segments, x, use_reentrant=False)


def autocast_forward(model: nn.Module, x: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    if dtype != torch.bfloat16 and dtype != torch.float16:
        raise ValueError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype!r}")
    with torch.autocast(x.device.type, dtype=dtype):
        out = model(x)
    return out
