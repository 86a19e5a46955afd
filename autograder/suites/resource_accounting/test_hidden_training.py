"""Hidden tests of §8 to §10: saved activations, gradient accumulation, checkpointing and autocast at random sizes.

Expected values are closed forms, a full-batch optimizer step and float64 autograd computed here on
the same seeded objects (the builders of scenarios.py), torch's own autocast, or (for one test) the
reference saved_activation_bytes.
"""

import math
import random

import pytest
import torch

from autograder.suites.resource_accounting import scenarios

pytestmark = pytest.mark.visibility("hidden")

FLOAT32 = 4


def randn(rng: random.Random, *shape, dtype=torch.float32) -> torch.Tensor:
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    return torch.randn(*shape, generator=gen).to(dtype)


def chain64(weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    for weight in weights:
        x = torch.relu(x @ weight)
    return x


def block_weights(rng: random.Random, dim: int, num_layers: int) -> list[torch.Tensor]:
    return [randn(rng, dim, dim) / math.sqrt(dim) for _ in range(num_layers)]


# --- saved_activation_bytes -------------------------------------------------------------------------------

@pytest.mark.points(2)
@pytest.mark.task("training.saved_activation_bytes")
def test_saved_activation_bytes_counts_each_storage_once_for_random_views(student, rng):
    """For 1 to 4 random tensors x_i (float32, float64 or bfloat16) whose y_i = x_i.exp() is saved by exp and
    again through random views (transpose, slice, reshape, a row) by sin, the bytes are Σ y_i.numel() ·
    element_size: one storage each, counted once and whole."""
    tensors = [{"shape": [rng.randint(2, 6) for _ in range(rng.randint(2, 3))],
                "dtype": rng.choice(("float32", "float64", "bfloat16")),
                "views": rng.sample(("t", "slice", "flat", "row", "same"), rng.randint(1, 4))}
               for _ in range(rng.randint(1, 4))]
    spec = {"seed": rng.randrange(2**31), "tensors": tensors}
    got = student.run(scenarios.saved_bytes, kind="views", spec=spec)
    expected = sum(math.prod(t["shape"]) * torch.finfo(getattr(torch, t["dtype"])).bits // 8 for t in tensors)
    assert type(got) is int and got == expected, f"{tensors}: got {got!r}, expected {expected}"


@pytest.mark.points(1.5)
@pytest.mark.task("training.saved_activation_bytes")
def test_saved_activation_bytes_counts_inputs_and_intermediates_that_mul_saves(student, rng):
    """For a chain a_0 * a_1 * ... * a_(n-1) of 2 to 5 random same-shape inputs that require grad, mul saves both
    operands: every input and the n - 2 intermediate products, (2n - 2)·numel·4 bytes (inputs are activations)."""
    n, shape = rng.randint(2, 5), [rng.randint(1, 7) for _ in range(rng.randint(1, 3))]
    spec = {"seed": rng.randrange(2**31), "shapes": [shape] * n}
    got = student.run(scenarios.saved_bytes, kind="inputs", spec=spec)
    expected = (2 * n - 2) * math.prod(shape) * FLOAT32
    assert type(got) is int and got == expected, f"{n} inputs of {shape}: got {got!r}, expected {expected}"


@pytest.mark.points(2)
@pytest.mark.task("training.saved_activation_bytes")
def test_saved_activation_bytes_excludes_parameters_of_random_mlps(student, rng):
    """For 2 random MLPs (1 to 4 Linear layers with bias, ReLUs between, 1 to 3 leading dims, input with or
    without grad) the bytes are those of the input and the hidden ReLU outputs, 4·rows·(d_0 + ... + d_(n-1)):
    the weights, saved as views weight.t(), are parameters and excluded."""
    for _ in range(2):
        dims = [rng.randint(1, 10) for _ in range(rng.randint(2, 5))]
        lead = [rng.randint(1, 4) for _ in range(rng.randint(1, 3))]
        spec = {"seed": rng.randrange(2**31), "dims": dims, "lead": lead, "input_grad": rng.random() < 0.5}
        got = student.run(scenarios.saved_bytes, kind="mlp", spec=spec)
        expected = FLOAT32 * math.prod(lead) * sum(dims[:-1])
        assert type(got) is int and got == expected, f"MLP {spec}: got {got!r}, expected {expected}"


@pytest.mark.points(1.5)
@pytest.mark.task("training.saved_activation_bytes")
def test_saved_activation_bytes_counts_the_bf16_copies_autocast_makes(student, rng):
    """relu(h @ W) over L random nn.Parameters under bf16 autocast saves bf16 copies, which are not parameters:
    the input's copy, the copies of the weights whose input needs grad (all L, or L - 1 when x does not require
    grad), and L ReLU outputs, 2·(rows·D + copies·D² + L·rows·D) bytes."""
    dim, num_layers, rows, input_grad = rng.randint(2, 10), rng.randint(1, 4), rng.randint(1, 6), rng.random() < 0.5
    spec = {"seed": rng.randrange(2**31), "dim": dim, "num_layers": num_layers, "rows": rows, "input_grad": input_grad}
    got = student.run(scenarios.saved_bytes, kind="autocast", spec=spec)
    copies = num_layers if input_grad else num_layers - 1
    expected = 2 * (rows * dim + copies * dim * dim + num_layers * rows * dim)
    assert type(got) is int and got == expected, f"autocast chain {spec}: got {got!r}, expected {expected}"


@pytest.mark.points(2)
@pytest.mark.task("training.saved_activation_bytes")
def test_saved_activation_bytes_matches_the_reference_on_random_op_chains(student, reference, rng):
    """On 2 random chains of Linear, LayerNorm, tanh, sigmoid, GELU, softmax, squares, residuals, casts and
    shuffled copies, saved_activation_bytes equals the reference's on the same function and input."""
    measure = reference.module("resource_accounting.training").saved_activation_bytes
    steps = ("linear", "norm", "tanh", "sigmoid", "gelu", "square", "transpose", "softmax", "double", "residual",
             "slice")
    for _ in range(2):
        spec = {"seed": rng.randrange(2**31), "rows": rng.randint(1, 6), "dim": rng.randint(2, 8),
                "ops": rng.choices(steps, k=rng.randint(3, 8))}
        fn, args = scenarios.saved_program("mix", spec)
        expected = measure(fn, *args)
        got = student.run(scenarios.saved_bytes, kind="mix", spec=spec)
        assert type(got) is int and got == expected, f"chain {spec}: got {got!r}, expected {expected}"


# --- accumulated_train_step -------------------------------------------------------------------------------

def accumulation_draw(rng: random.Random, optimizer: str, fewest_micro_batches: int = 1) -> dict:
    """A random case: model widths, activation, loss, batch = k · micro-batch size, optimizer hyperparameters.

    AdamW's eps is large enough that its first step, lr · g / (|g| + eps), does not blow a gradient that is
    0 up to rounding (an L1 loss's signs can cancel exactly) into a visible update; it also keeps the step
    sensitive to the gradient's scale.
    """
    k, size = rng.randint(fewest_micro_batches, 6), rng.randint(1, 4)
    loss = rng.choice(tuple(scenarios.LOSSES))
    widths = [rng.randint(1, 6) for _ in range(rng.randint(2, 4))]
    widths[-1] = max(widths[-1], 2) if loss == "cross_entropy" else widths[-1]
    hyper = ({"lr": rng.uniform(0.01, 0.5), "momentum": rng.choice((0.0, 0.9)), "weight_decay": rng.choice((0.0, 0.01))}
             if optimizer == "sgd" else
             {"lr": rng.uniform(1e-3, 0.05), "weight_decay": rng.choice((0.0, 0.01, 0.1)),
              "betas": (rng.choice((0.8, 0.9)), rng.choice((0.99, 0.999))), "eps": rng.choice((1e-4, 1e-3))})
    case = {"seed": rng.randrange(2**31), "widths": widths, "activation": rng.choice(list(scenarios.ACTIVATIONS)),
            "loss": loss, "batch": k * size}
    return {"case": case, "optimizer": optimizer, "hyper": hyper, "num_micro_batches": k}


def full_batch_step(draw: dict) -> tuple[list[torch.Tensor], float]:
    """The parameters after one optimizer step on the whole batch's mean loss, and that loss (trusted)."""
    built = scenarios.accumulation_case(**draw["case"])
    model = built["model"]
    opt = scenarios.optimizer_for(model, draw["optimizer"], draw["hyper"])
    loss = built["loss_fn"](model(built["inputs"]), built["targets"])
    loss.backward()
    opt.step()
    return [p.detach() for p in model.parameters()], loss.item()


def run_accumulation(student, rng: random.Random, draw: dict, stale: bool) -> dict:
    return student.run(scenarios.accumulation, **draw, stale=stale, stale_seed=rng.randrange(2**31))


def assert_same_parameters(trusted, got: dict, expected: list[torch.Tensor], draw: dict) -> None:
    assert type(got["params"]) is list and len(got["params"]) == len(expected), f"{draw}: malformed parameters"
    for i, (param, want) in enumerate(zip(got["params"], expected)):
        trusted.assert_tensor(f"parameter {i} after the step, {draw}", param, want, dtype=torch.float64,
                              rtol=1e-10, atol=1e-12)


@pytest.mark.points(4)
@pytest.mark.task("training.accumulated_train_step")
def test_accumulated_step_leaves_the_model_as_one_full_batch_step_at_random_micro_batch_counts(student, trusted, rng):
    """For 4 random cases (SGD with or without momentum and weight decay, AdamW with random betas and weight
    decay; 1 to 6 micro-batches; random MLP widths and activation; MSE, L1, Huber or cross-entropy) the
    parameters after accumulated_train_step equal one full-batch step's (float64, rtol 1e-10)."""
    for optimizer in rng.sample(("sgd", "sgd", "adamw", "adamw"), 4):
        draw = accumulation_draw(rng, optimizer)
        got = run_accumulation(student, rng, draw, stale=False)
        assert_same_parameters(trusted, got, full_batch_step(draw)[0], draw)


@pytest.mark.points(2)
@pytest.mark.task("training.accumulated_train_step")
def test_accumulated_step_ignores_stale_gradients(student, trusted, rng):
    """When every parameter starts with a large random stale gradient (from "an earlier step"), the result is still
    one clean full-batch step, for a random SGD case and a random AdamW case."""
    for optimizer in ("sgd", "adamw"):
        draw = accumulation_draw(rng, optimizer)
        got = run_accumulation(student, rng, draw, stale=True)
        assert_same_parameters(trusted, got, full_batch_step(draw)[0], draw)


@pytest.mark.edge
@pytest.mark.points(1.5)
@pytest.mark.task("training.accumulated_train_step")
def test_accumulated_step_steps_the_optimizer_exactly_once(student, rng):
    """For 2 random cases with 2 to 6 micro-batches the optimizer's step runs exactly once (counted by a
    post-step hook on the optimizer), not once per micro-batch."""
    for optimizer in ("sgd", "adamw"):
        draw = accumulation_draw(rng, optimizer, fewest_micro_batches=2)
        got = run_accumulation(student, rng, draw, stale=True)
        assert got["steps"] == 1, f"{draw}: the optimizer stepped {got['steps']} times, expected once"


@pytest.mark.points(1)
@pytest.mark.task("training.accumulated_train_step")
def test_accumulated_step_returns_the_full_batch_mean_loss_at_random_cases(student, rng):
    """For 2 random cases accumulated_train_step returns a Python float equal to the full batch's mean loss before
    the step (rel 1e-10)."""
    for optimizer in ("sgd", "adamw"):
        draw = accumulation_draw(rng, optimizer)
        got = run_accumulation(student, rng, draw, stale=False)
        expected = full_batch_step(draw)[1]
        assert type(got["loss"]) is float, f"{draw}: expected a float, got {type(got['loss']).__name__}"
        assert got["loss"] == pytest.approx(expected, rel=1e-10), f"{draw}: loss {got['loss']}, expected {expected}"


@pytest.mark.points(1)
@pytest.mark.visibility("after_due_date")
@pytest.mark.task("training.accumulated_train_step")
def test_accumulated_step_runs_equal_contiguous_micro_batches_in_order(student, trusted, rng):
    """With grad enabled the model sees exactly num_micro_batches forwards, each of batch / num_micro_batches rows,
    which are the batch's consecutive row blocks in order (recorded from the products aten runs with the first
    layer's weight, however the code reaches that layer)."""
    draw = accumulation_draw(rng, rng.choice(("sgd", "adamw")))
    got = run_accumulation(student, rng, draw, stale=False)
    inputs = scenarios.accumulation_case(**draw["case"])["inputs"]
    k = draw["num_micro_batches"]
    assert type(got["micro_batches"]) is list and len(got["micro_batches"]) == k, \
        f"{draw}: {len(got['micro_batches'])} grad-enabled forwards, expected {k}"
    for i, (rows, want) in enumerate(zip(got["micro_batches"], inputs.split(inputs.shape[0] // k))):
        trusted.assert_tensor(f"micro-batch {i} of {k}, {draw}", rows, want, dtype=torch.float64)


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("training.accumulated_train_step")
def test_accumulated_step_rejects_random_uneven_splits(student, rng):
    """ValueError for a random batch that a random micro-batch count does not divide, for 0 or a negative count,
    and for targets with a different batch size than the inputs."""
    batch = rng.randint(5, 40)
    uneven = rng.choice([k for k in range(2, batch) if batch % k])
    cases = [(batch, batch, uneven), (batch, batch, rng.choice((0, -rng.randint(1, 8)))),
             (batch, batch + rng.randint(1, 5), 1)]
    for inputs, targets, k in cases:
        with pytest.raises(ValueError):
            student.run(scenarios.accumulation_invalid, batch=inputs, target_batch=targets, num_micro_batches=k)
            pytest.fail(f"no ValueError for {inputs} input rows, {targets} target rows, {k} micro-batches")


# --- checkpointed_forward -----------------------------------------------------------------------------------

@pytest.mark.points(3)
@pytest.mark.task("training.checkpointed_forward")
def test_checkpointed_forward_keeps_output_and_gradients_at_random_segment_counts(student, trusted, rng):
    """For 3 random networks (2 to 9 layers, 1 to L segments, random width and batch, 2-D or 3-D input) the
    output and the gradients of every weight and of x equal model(x)'s (float64 autograd, rtol 1e-5); in the
    first, x does not require grad (a batch of data) and every weight still gets its gradient.

    Hint ("is missing"): checkpoint(..., use_reentrant=False); the reentrant variant gives no parameter
    gradients when no input of a segment requires grad.
    """
    for case in range(3):
        needs_grad = case > 0
        dim, num_layers = rng.randint(2, 10), rng.randint(2, 9)
        segments = rng.randint(1, num_layers)
        lead = [rng.randint(1, 5) for _ in range(rng.randint(1, 2))]
        weights, x, grad_output = block_weights(rng, dim, num_layers), randn(rng, *lead, dim), randn(rng, *lead, dim)
        got = student.run(scenarios.checkpointed_grads, weights=weights, x=x, grad_output=grad_output,
                          num_segments=segments, input_requires_grad=needs_grad)
        leaves = [w.double().requires_grad_() for w in weights] + [x.double().requires_grad_(needs_grad)]
        out = chain64(leaves[:-1], leaves[-1])
        grads = torch.autograd.grad(out, leaves[:num_layers + needs_grad], grad_output.double())
        where = (f"{num_layers} layers of width {dim} in {segments} segments, x of {tuple(x.shape)} "
                 f"{'requiring' if needs_grad else 'not requiring'} grad")
        trusted.assert_tensor(f"output, {where}", got["output"], out.detach(), dtype=torch.float32, rtol=1e-5,
                              atol=1e-6)
        assert type(got["weight_grads"]) is list and len(got["weight_grads"]) == num_layers, f"{where}: weight grads"
        for i, (grad, want) in enumerate(zip(got["weight_grads"] + [got["input_grad"]], grads)):
            assert grad is not None, f"{where}: gradient {i} is missing"
            trusted.assert_tensor(f"gradient {i}, {where}", grad, want, rtol=1e-5, atol=1e-6)


def bounded_segments(num_layers: int) -> list[int]:
    """Segment counts whose bound (k + ceil(L/k) + 1 units) is below the plain forward's L + 1 units and which
    checkpoint_sequential also meets (its unchecked last segment has L mod k extra layers: at most 2)."""
    return [k for k in range(2, num_layers) if k + math.ceil(num_layers / k) < num_layers and num_layers % k <= 2]


@pytest.mark.edge
@pytest.mark.points(3)
@pytest.mark.task("training.checkpointed_forward")
def test_checkpointed_saved_bytes_stay_within_the_bound_at_random_sizes(student, rng):
    """For 2 random (L, segments, B, D), L from 6 to 24: the plain forward saves (L + 1)·B·D·4 bytes (measured with
    saved_activation_bytes) and checkpointed_forward holds at most (segments + ceil(L / segments) + 1)·B·D·4 when it
    returns, a bound below the plain forward's (measured by kernels.memory: what it created that is still alive)."""
    for _ in range(2):
        num_layers = rng.randint(6, 24)
        segments = rng.choice(bounded_segments(num_layers))
        batch, dim = rng.randint(1, 6), rng.randint(2, 12)
        got = student.run(scenarios.checkpointed_bytes, seed=rng.randrange(2**31), batch=batch, dim=dim,
                          num_layers=num_layers, num_segments=segments)
        unit, where = batch * dim * FLOAT32, f"L = {num_layers}, {segments} segments, B = {batch}, D = {dim}"
        assert got["plain"] == (num_layers + 1) * unit, f"{where}: the plain forward saved {got['plain']} bytes"
        bound = (segments + math.ceil(num_layers / segments) + 1) * unit
        assert got["checkpointed"] <= bound, \
            f"{where}: checkpointed_forward holds {got['checkpointed']} bytes > bound {bound}"


@pytest.mark.edge
@pytest.mark.points(2)
@pytest.mark.task("training.checkpointed_forward")
def test_checkpointing_16_layers_in_4_segments_saves_less_than_half_at_random_widths(student, rng):
    """For L = 16 and 4 segments with a random batch and width, the checkpointed forward holds less than half of
    the plain forward's (16 + 1)·B·D·4 saved bytes when it returns (measured by kernels.memory)."""
    batch, dim = rng.randint(1, 8), rng.randint(2, 16)
    got = student.run(scenarios.checkpointed_bytes, seed=rng.randrange(2**31), batch=batch, dim=dim, num_layers=16,
                      num_segments=4)
    assert got["plain"] == 17 * batch * dim * FLOAT32, f"B = {batch}, D = {dim}: plain forward saved {got['plain']}"
    assert got["checkpointed"] < got["plain"] / 2, \
        f"B = {batch}, D = {dim}: checkpointed forward holds {got['checkpointed']} bytes, " \
        f"not under half of {got['plain']}"


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("training.checkpointed_forward")
def test_checkpointed_forward_rejects_random_segment_counts_outside_1_to_l(student, rng):
    """ValueError for 0, a random negative count and a random count above the number of layers."""
    num_layers = rng.randint(1, 6)
    for segments in (0, -rng.randint(1, 5), num_layers + rng.randint(1, 5)):
        with pytest.raises(ValueError):
            student.run(scenarios.checkpointed_invalid, dim=3, num_layers=num_layers, num_segments=segments)
            pytest.fail(f"no ValueError for {segments} segments of {num_layers} layers")


# --- autocast_forward ---------------------------------------------------------------------------------------

HALF_EPS = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}


def autocast_expected(weights: list[torch.Tensor], x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The network's formula under torch's own CPU autocast (trusted)."""
    with torch.autocast("cpu", dtype=dtype):
        return chain64(weights, x)


def autocast_draw(rng: random.Random) -> tuple:
    dim, num_layers, dtype = rng.randint(2, 24), rng.randint(1, 4), rng.choice((torch.bfloat16, torch.float16))
    lead = [rng.randint(1, 5) for _ in range(rng.randint(1, 2))]
    return block_weights(rng, dim, num_layers), randn(rng, *lead, dim), dtype


@pytest.mark.points(3)
@pytest.mark.task("training.autocast_forward")
def test_autocast_forward_output_and_parameter_dtypes_for_random_networks(student, trusted, rng):
    """For 3 random networks (1 to 4 layers, random width and leading dims) and dtype bfloat16 or float16:
    the output is in dtype and within a few ulps of torch's own autocast result, every matmul ran on dtype
    operands and no other op computed with the float32 weights themselves (recorded by a dispatch mode: a weight
    is only cast to dtype), and the parameters and the input stay float32."""
    for _ in range(3):
        weights, x, dtype = autocast_draw(rng)
        got = student.run(scenarios.autocast_run, weights=weights, x=x, dtype=dtype)
        where = f"{len(weights)} layers of width {weights[0].shape[0]}, x of {tuple(x.shape)}, {dtype}"
        expected = autocast_expected(weights, x, dtype)
        tol = 4 * HALF_EPS[dtype]
        trusted.assert_tensor(f"output, {where}", got["output"], expected, dtype=dtype, rtol=tol,
                              atol=tol * max(1.0, expected.abs().max().item()))
        assert got["matmul_dtypes"] and set(got["matmul_dtypes"]) == {dtype}, \
            f"{where}: the matmuls ran on {got['matmul_dtypes']}, expected {dtype} operands only"
        assert got["float32_parameter_ops"] == [], \
            f"{where}: {sorted(set(got['float32_parameter_ops']))} computed with the float32 weights themselves; " \
            f"under autocast a weight is only cast to {dtype}, and the matmuls read that copy"
        assert got["param_dtypes"] == [torch.float32] * len(weights), \
            f"{where}: parameters became {got['param_dtypes']}"
        assert got["input_dtype"] == torch.float32, f"{where}: the input became {got['input_dtype']}"


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.visibility("after_due_date")
@pytest.mark.task("training.autocast_forward")
def test_autocast_is_off_again_after_autocast_forward(student, rng):
    """After autocast_forward returns, autocast is disabled again on the device and a float32 matmul gives float32
    (the context is exited, not left entered)."""
    weights, x, dtype = autocast_draw(rng)
    got = student.run(scenarios.autocast_run, weights=weights, x=x, dtype=dtype)
    assert got["still_enabled"] is False, "autocast is still enabled after autocast_forward returned"
    assert got["after"] == torch.float32, f"a float32 matmul after autocast_forward gave {got['after']}"


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("training.autocast_forward")
def test_autocast_forward_rejects_random_other_dtypes(student, rng):
    """ValueError for a dtype other than bfloat16 and float16: float32 and float64 (the likely slips: on a CPU
    torch.autocast only warns for float32 and runs without autocasting), and one drawn among int32, int64 and
    uint8."""
    for dtype in (torch.float32, torch.float64, rng.choice((torch.int32, torch.int64, torch.uint8))):
        with pytest.raises(ValueError):
            student.run(scenarios.autocast_invalid, dtype=dtype)
            pytest.fail(f"no ValueError for {dtype}")


@pytest.mark.points(1)
@pytest.mark.gpu
@pytest.mark.task("training.autocast_forward")
def test_autocast_forward_on_cuda_runs_on_the_inputs_device(student, rng):
    """On CUDA tensors autocast_forward autocasts on "cuda": the output is a CUDA tensor in dtype, the matmuls ran on
    dtype operands and the parameters stay float32."""
    weights, x, dtype = autocast_draw(rng)
    got = student.run(scenarios.autocast_run, weights=weights, x=x, dtype=dtype, device="cuda")
    assert got["device"] == "cuda" and got["output"].dtype == dtype, \
        f"output on {got['device']} in {got['output'].dtype}"
    assert got["matmul_dtypes"] and set(got["matmul_dtypes"]) == {dtype}, f"matmuls ran on {got['matmul_dtypes']}"
    assert got["param_dtypes"] == [torch.float32] * len(weights)
