"""Training-time memory: measuring saved activations, gradient accumulation, checkpointing, autocast.

    saved_activation_bytes(model, x)                  # bytes autograd keeps for backward
    accumulated_train_step(model, opt, X, Y, F.mse_loss, 4)
    y = checkpointed_forward(model, x, num_segments=4)
    y = autocast_forward(model, x)                    # bf16 output, fp32 parameters
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from resource_accounting.network import DeepNetwork


def saved_activation_bytes(fn, *args) -> int:
    """Bytes of the distinct storages autograd saves for backward while running `fn(*args)`.

    A storage counts once however many tensors (views) of it are saved. Parameters are excluded: a
    saved tensor is a parameter when it, or the tensor it is a view of (`tensor._base`), is an
    nn.Parameter. Everything else saved (inputs, intermediate results, cast copies) counts.

    Handout: §8 Activation memory and gradient accumulation
    """
    raise NotImplementedError('saved_activation_bytes in resource_accounting/training.py is not implemented yet: write it (handout §8 Activation memory and gradient accumulation)')


def accumulated_train_step(model: nn.Module, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
                           targets: torch.Tensor, loss_fn, num_micro_batches: int) -> float:
    """One optimizer step over `num_micro_batches` equal micro-batches, the same as one full-batch step.

    `loss_fn(outputs, targets)` must be a mean over the batch. Returns the full-batch mean loss.
    ValueError when the batch does not split into equal micro-batches.

    Handout: §8 Activation memory and gradient accumulation
    """
    raise NotImplementedError('accumulated_train_step in resource_accounting/training.py is not implemented yet: write it (handout §8 Activation memory and gradient accumulation)')


def checkpointed_forward(model: DeepNetwork, x: torch.Tensor, num_segments: int) -> torch.Tensor:
    """`model(x)` with its layers run in `num_segments` contiguous checkpointed segments.

    Same output and gradients as `model(x)`; only each segment's input is kept for backward, the
    rest is recomputed. ValueError unless 1 <= num_segments <= len(model.layers).

    Handout: §9 Activation checkpointing
    """
    raise NotImplementedError('checkpointed_forward in resource_accounting/training.py is not implemented yet: write it (handout §9 Activation checkpointing)')


def autocast_forward(model: nn.Module, x: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """`model(x)` under torch.autocast on x's device: matmuls run in `dtype`, parameters stay float32.

    ValueError unless dtype is torch.bfloat16 or torch.float16.

    Handout: §10 Mixed precision
    """
    raise NotImplementedError('autocast_forward in resource_accounting/training.py is not implemented yet: write it (handout §10 Mixed precision)')
