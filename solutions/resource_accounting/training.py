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
    ### BEGIN SOLUTION
    storages: dict[int, torch.UntypedStorage] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        base = tensor if tensor._base is None else tensor._base
        if not isinstance(base, nn.Parameter):
            storage = tensor.untyped_storage()
            # Keyed by address: views share their storage's address. Holding the storage keeps the
            # address from being reused by another tensor while we count.
            storages[storage.data_ptr()] = storage
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn(*args)
    return sum(storage.nbytes() for storage in storages.values())
    ### END SOLUTION


def accumulated_train_step(model: nn.Module, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
                           targets: torch.Tensor, loss_fn, num_micro_batches: int) -> float:
    """One optimizer step over `num_micro_batches` equal micro-batches, the same as one full-batch step.

    `loss_fn(outputs, targets)` must be a mean over the batch. Returns the full-batch mean loss.
    ValueError when the batch does not split into equal micro-batches.

    Handout: §8 Activation memory and gradient accumulation
    """
    ### BEGIN SOLUTION
    batch = inputs.shape[0] if inputs.dim() else 0
    if type(num_micro_batches) is not int or num_micro_batches < 1 or batch % num_micro_batches:
        raise ValueError(f"num_micro_batches must be a positive int dividing the batch of {batch}, "
                         f"got {num_micro_batches!r}")
    if targets.shape[:1] != inputs.shape[:1]:
        raise ValueError(f"inputs and targets must have the same batch size, got {batch} and {targets.shape[:1]}")
    size = batch // num_micro_batches
    optimizer.zero_grad()
    total = 0.0
    for x, y in zip(inputs.split(size), targets.split(size)):
        # The mean over the batch is the mean of the micro-batch means: scale each by 1/k so the
        # gradients summed by backward() are the full batch's.
        loss = loss_fn(model(x), y) / num_micro_batches
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total
    ### END SOLUTION


def checkpointed_forward(model: DeepNetwork, x: torch.Tensor, num_segments: int) -> torch.Tensor:
    """`model(x)` with its layers run in `num_segments` contiguous checkpointed segments.

    Same output and gradients as `model(x)`; only each segment's input is kept for backward, the
    rest is recomputed. ValueError unless 1 <= num_segments <= len(model.layers).

    Handout: §9 Activation checkpointing
    """
    ### BEGIN SOLUTION
    layers = list(model.layers)
    if type(num_segments) is not int or not 1 <= num_segments <= len(layers):
        raise ValueError(f"num_segments must be an int from 1 to the {len(layers)} layers, got {num_segments!r}")

    def run(segment: list[nn.Module], h: torch.Tensor) -> torch.Tensor:
        for layer in segment:
            h = layer(h)
        return h

    start = 0
    for i in range(num_segments):
        # Sizes as even as possible: the first L mod k segments get one layer more.
        size = len(layers) // num_segments + (i < len(layers) % num_segments)
        x = checkpoint(run, layers[start:start + size], x, use_reentrant=False)
        start += size
    return x
    ### END SOLUTION


def autocast_forward(model: nn.Module, x: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """`model(x)` under torch.autocast on x's device: matmuls run in `dtype`, parameters stay float32.

    ValueError unless dtype is torch.bfloat16 or torch.float16.

    Handout: §10 Mixed precision
    """
    ### BEGIN SOLUTION
    if dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"autocast runs matmuls in torch.bfloat16 or torch.float16, got {dtype!r}")
    with torch.autocast(device_type=x.device.type, dtype=dtype):
        return model(x)
    ### END SOLUTION
