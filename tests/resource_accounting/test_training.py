"""§8 to §10: saved activations, gradient accumulation, activation checkpointing, mixed precision.

Expected values are computed here with plain torch (a full-batch optimizer step, float64 autograd of
the network's formula) from the same tensors the scenarios are given.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.resource_accounting import scenarios

FLOAT32 = 4


def deep_network_reference(weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """relu(... relu(x @ W1) ... @ WL), differentiable in whatever dtype it is given."""
    for weight in weights:
        x = torch.relu(x @ weight)
    return x


def block_weights(seed: int, dim: int, num_layers: int) -> list[torch.Tensor]:
    torch.manual_seed(seed)
    return [torch.randn(dim, dim) / math.sqrt(dim) for _ in range(num_layers)]


# --- saved_activation_bytes -------------------------------------------------------------------------

@pytest.mark.points(2)
@pytest.mark.task("training.saved_activation_bytes")
def test_saved_activation_bytes_counts_a_storage_once_however_many_views_are_saved(student):
    """y = x.exp() is saved by exp, and y, y.t() and y.view(-1) by sin, cos and log: one storage, 6·10·4 bytes.

    Hint: key what you count by tensor.untyped_storage() (its data_ptr()), not by tensor.
    """
    got = student.run(scenarios.saved_bytes_shared_storage, seed=0, rows=6, cols=10)
    assert type(got) is int and got == 6 * 10 * FLOAT32


@pytest.mark.points(2)
@pytest.mark.task("training.saved_activation_bytes")
def test_saved_activation_bytes_excludes_parameters_but_counts_inputs(student):
    """relu(Linear(x)) on an input x that requires grad saves x, the weight (as weight.t()) and the output:
    only x and the output count, 2·5·12·4 bytes.

    Hint: the weight arrives as a view of an nn.Parameter (its _base), not as the parameter itself.
    """
    got = student.run(scenarios.saved_bytes_linear, seed=0, batch=5, dim=12)
    assert type(got) is int and got == 2 * 5 * 12 * FLOAT32


# --- accumulated_train_step -------------------------------------------------------------------------

def accumulation_case(seed: int) -> dict:
    """An MLP's weights (Linear(4, 8), Tanh, Linear(8, 2); float64) and a batch of 8, from a seed."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(8, 4), (8,), (2, 8), (2,)]
    return {"weights": [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes],
            "inputs": torch.randn(8, 4, generator=g, dtype=torch.float64),
            "targets": torch.randn(8, 2, generator=g, dtype=torch.float64)}


def full_batch_step(case: dict, optimizer: type, lr: float) -> tuple[list[torch.Tensor], float]:
    """Parameters after one optimizer step on the full batch's mean squared error, and that loss."""
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).double()
    with torch.no_grad():
        for param, weight in zip(model.parameters(), case["weights"]):
            param.copy_(weight)
    opt = optimizer(model.parameters(), lr=lr)
    loss = F.mse_loss(model(case["inputs"]), case["targets"])
    loss.backward()
    opt.step()
    return [p.detach() for p in model.parameters()], loss.item()


@pytest.mark.points(3)
@pytest.mark.task("training.accumulated_train_step")
@pytest.mark.parametrize("optimizer, torch_optimizer, lr", [("sgd", torch.optim.SGD, 0.1),
                                                            ("adamw", torch.optim.AdamW, 0.01)])
def test_accumulated_step_leaves_the_model_as_one_full_batch_step(student, optimizer, torch_optimizer, lr):
    """4 micro-batches of 2 rows give the same parameters (float64, rtol 1e-10) as one step on all 8 rows.

    The model starts with stale nonzero gradients, so they must be zeroed first.
    Hint: zero the grads, divide each micro-batch loss by num_micro_batches, backward each, step once.
    """
    case = accumulation_case(seed=1)
    got = student.run(scenarios.accumulation_step, **case, optimizer=optimizer, lr=lr, num_micro_batches=4)
    expected, _ = full_batch_step(case, torch_optimizer, lr)
    assert len(got["params"]) == len(expected)
    for name, param, want in zip(("weight 1", "bias 1", "weight 2", "bias 2"), got["params"], expected):
        torch.testing.assert_close(param, want, rtol=1e-10, atol=1e-12, msg=lambda m: f"{name}: {m}")


@pytest.mark.points(1)
@pytest.mark.task("training.accumulated_train_step")
def test_accumulated_step_returns_the_full_batch_mean_loss(student):
    """accumulated_train_step returns the full batch's mean loss (before the step) as a Python float."""
    case = accumulation_case(seed=2)
    got = student.run(scenarios.accumulation_step, **case, optimizer="sgd", lr=0.1, num_micro_batches=2)
    _, loss = full_batch_step(case, torch.optim.SGD, 0.1)
    assert type(got["loss"]) is float, f"expected a float, got {type(got['loss']).__name__}"
    assert got["loss"] == pytest.approx(loss, rel=1e-12)


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("training.accumulated_train_step")
@pytest.mark.parametrize("batch, num_micro_batches", [(10, 4), (8, 0)])
def test_accumulated_step_rejects_a_batch_that_does_not_split_evenly(student, batch, num_micro_batches):
    """A batch of 10 in 4 micro-batches (or 0 micro-batches) raises ValueError."""
    with pytest.raises(ValueError):
        student.run(scenarios.accumulation_with_micro_batches, batch=batch, num_micro_batches=num_micro_batches)


# --- checkpointed_forward ---------------------------------------------------------------------------

@pytest.mark.points(2)
@pytest.mark.task("training.checkpointed_forward")
@pytest.mark.parametrize("num_segments", [1, 3, 7])
def test_checkpointed_forward_keeps_the_output_and_the_gradients(student, num_segments):
    """checkpointed_forward of a 7-layer DeepNetwork gives model(x)'s output and the same gradients for every
    weight and for x (compared with float64 autograd, rtol 1e-5); and when x does not require grad (a batch
    of data), every weight still gets its gradient.

    Hint ("is missing"): checkpoint(..., use_reentrant=False); the reentrant variant gives no parameter
    gradients when no input of a segment requires grad.
    Hint (values, close, scale): run the layers in order, each once, every segment's output the next one's input.
    """
    weights = block_weights(seed=0, dim=8, num_layers=7)
    x, grad_output = torch.randn(3, 8), torch.randn(3, 8)
    close = dict(rtol=1e-5, atol=1e-6)
    for needs_grad in (True, False):
        got = student.run(scenarios.checkpointed_output_and_grads, weights=weights, x=x, grad_output=grad_output,
                          num_segments=num_segments, input_requires_grad=needs_grad)
        leaves = [w.double().requires_grad_(True) for w in weights] + [x.double().requires_grad_(needs_grad)]
        out = deep_network_reference(leaves[:-1], leaves[-1])
        grads = torch.autograd.grad(out, leaves[:7 + needs_grad], grad_output.double())
        assert got["output"].dtype == torch.float32
        torch.testing.assert_close(got["output"].double(), out.detach(), **close)
        assert len(got["weight_grads"]) == 7
        for i, (grad, want) in enumerate(zip(got["weight_grads"] + [got["input_grad"]], grads)):
            assert grad is not None, f"gradient {i} is missing ({'with' if needs_grad else 'without'} x requiring grad)"
            torch.testing.assert_close(grad.double(), want, **close)


@pytest.mark.edge
@pytest.mark.points(3)
@pytest.mark.task("training.checkpointed_forward")
def test_checkpointing_16_layers_in_4_segments_saves_less_than_half(student):
    """For L = 16, B = 4, D = 8: the plain forward saves (16 + 1)·B·D·4 bytes (measured with your
    saved_activation_bytes); checkpointed_forward with 4 segments holds less than half of that when it returns, and
    at most (4 + ceil(16 / 4) + 1)·B·D·4 bytes (measured by kernels.memory: the bytes of what it created that are
    still alive, which is what autograd keeps for the backward, and the output).

    Hint ("plain forward is off"): this part is saved_activation_bytes's (§8): its own tests must pass first.
    Hint ("checkpointed forward saves"): run every segment under torch.utils.checkpoint.checkpoint(...,
    use_reentrant=False); a layer outside the checkpointed segments saves its activations.
    """
    batch, dim, num_layers, segments = 4, 8, 16, 4
    got = student.run(scenarios.checkpointed_saved_bytes, seed=0, batch=batch, dim=dim, num_layers=num_layers,
                      num_segments=segments)
    unit = batch * dim * FLOAT32
    assert got["plain"] == (num_layers + 1) * unit, "saved_activation_bytes of the plain forward is off"
    bound = (segments + math.ceil(num_layers / segments) + 1) * unit
    assert got["checkpointed"] <= bound, f"checkpointed forward holds {got['checkpointed']} bytes > bound {bound}"
    assert got["checkpointed"] < got["plain"] / 2, \
        f"checkpointed forward holds {got['checkpointed']} bytes, not less than half of the plain {got['plain']}"


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("training.checkpointed_forward")
@pytest.mark.parametrize("num_segments", [0, 5])
def test_checkpointed_forward_rejects_a_segment_count_outside_1_to_l(student, num_segments):
    """checkpointed_forward on a 4-layer network raises ValueError for 0 or 5 segments."""
    with pytest.raises(ValueError):
        student.run(scenarios.checkpointed_with_segments, dim=4, num_layers=4, num_segments=num_segments)


# --- autocast_forward -------------------------------------------------------------------------------

@pytest.mark.points(2)
@pytest.mark.task("training.autocast_forward")
def test_autocast_forward_runs_the_matmuls_in_bf16_and_keeps_fp32_parameters(student):
    """autocast_forward(model, x) on CPU runs every matmul on bfloat16 operands (no other op computes with the
    float32 weights: each is only cast to bfloat16) and returns the model's output in bfloat16 (within bf16
    rounding, 5e-2), while every parameter stays float32.

    Hint: wrap the forward in torch.autocast(device_type=x.device.type, dtype=dtype); casting the output
    afterwards is not mixed precision.
    """
    weights = block_weights(seed=0, dim=16, num_layers=2)
    x = torch.randn(4, 16)
    got = student.run(scenarios.autocast_output, weights=weights, x=x)
    assert got["output"].dtype == torch.bfloat16, f"output dtype {got['output'].dtype}, expected torch.bfloat16"
    assert got["matmul_dtypes"] and set(got["matmul_dtypes"]) == {torch.bfloat16}, (
        f"the matmuls ran on {got['matmul_dtypes']}, expected bfloat16 operands only")
    assert got["float32_parameter_ops"] == [], (
        f"{sorted(set(got['float32_parameter_ops']))} computed with the float32 weights themselves; under autocast "
        "a weight is only cast to bfloat16, and the matmuls read that copy")
    assert got["param_dtypes"] == [torch.float32, torch.float32]
    expected = deep_network_reference([w.double() for w in weights], x.double())
    torch.testing.assert_close(got["output"].double(), expected, rtol=5e-2, atol=5e-2)
