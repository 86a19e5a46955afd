"""Scenarios: the parts of the tests that drive student code with objects (modules, autograd, modes).

Each scenario takes keyword arguments of plain data, builds its own inputs (seeded, or the tensors it
is given), exercises the student's code and returns plain data only. The tests compute what the
answer should be on their own, from torch itself or from formulas, and compare.

Only the standard library, torch, kernels and the student's packages are imported here: when
grading, this module runs in the sandboxed worker beside the submission. `kernels` comes first so that
Triton is in the right mode before any dispatch mode makes torch import it.
"""

import kernels  # noqa: F401  (selects Triton's mode before torch's dispatch modes import Triton)
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode


def _mlp(dims: list[int]) -> nn.Sequential:
    """Linear layers of the given widths with ReLUs between them."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(dims, dims[1:])):
        layers += [nn.ReLU()] if i else []
        layers.append(nn.Linear(fan_in, fan_out))
    return nn.Sequential(*layers)


def _deep_network(weights: list[torch.Tensor]):
    """The student's DeepNetwork with its blocks' weights set to `weights`."""
    from resource_accounting.network import DeepNetwork

    model = DeepNetwork(weights[0].shape[0], len(weights))
    with torch.no_grad():
        for layer, weight in zip(model.layers, weights):
            layer.weight.copy_(weight)
    return model


# --- memory -----------------------------------------------------------------------------------------

def meta_tensor_memory(shape: list[int], dtype: torch.dtype) -> int:
    """get_memory_usage of a meta tensor: a shape and a dtype, no storage allocated."""
    from resource_accounting.memory import get_memory_usage

    return get_memory_usage(torch.empty(*shape, dtype=dtype, device="meta"))


# --- flops ------------------------------------------------------------------------------------------

def flop_counter_mlp(seed: int, batch_shape: list[int], dims: list[int]) -> dict:
    """FlopCounter around an MLP's forward and backward."""
    from resource_accounting.flops import FlopCounter

    torch.manual_seed(seed)
    model = _mlp(dims)
    x = torch.randn(*batch_shape, dims[0])
    with FlopCounter() as counter:
        model(x).sum().backward()
    return {"total": counter.total_flops, "by_op": dict(counter.flops_by_op)}


def flop_counter_batched(seed: int, batch: int, m: int, n: int, p: int) -> dict:
    """FlopCounter around torch.bmm and torch.baddbmm, forward and backward."""
    from resource_accounting.flops import FlopCounter

    torch.manual_seed(seed)
    a = torch.randn(batch, m, n, requires_grad=True)
    b = torch.randn(batch, n, p, requires_grad=True)
    bias = torch.randn(batch, m, p, requires_grad=True)
    with FlopCounter() as counter:
        (torch.bmm(a, b).sum() + torch.baddbmm(bias, a, b).sum()).backward()
    return {"total": counter.total_flops, "by_op": dict(counter.flops_by_op)}


def flop_counter_elementwise(seed: int, rows: int, cols: int, count_elementwise: bool) -> dict:
    """FlopCounter around a broadcast add, a sub, a mul, a div and one matmul (no autograd)."""
    from resource_accounting.flops import FlopCounter

    torch.manual_seed(seed)
    column, row = torch.randn(rows, 1), torch.randn(1, cols)
    weight = torch.randn(cols, 3)
    with FlopCounter(count_elementwise=count_elementwise) as counter:
        grid = column + row            # (rows, cols) from (rows, 1) and (1, cols)
        grid = (grid * 2.0 - row) / 3.0
        grid @ weight
    return {"total": counter.total_flops, "by_op": dict(counter.flops_by_op)}


# --- network ----------------------------------------------------------------------------------------

def deep_network_parameters(dim: int, num_layers: int) -> dict:
    """get_num_parameters of a fresh DeepNetwork, and its parameters' names and shapes."""
    from resource_accounting.network import DeepNetwork, get_num_parameters

    model = DeepNetwork(dim, num_layers)
    return {
        "count": get_num_parameters(model),
        "layers_is_module_list": type(model.layers) is nn.ModuleList,
        "parameters": {name: list(p.shape) for name, p in model.named_parameters()},
    }


def torch_module_parameters(sizes: list[list[int]]) -> int:
    """get_num_parameters of an nn.Sequential of Linear layers, (in, out, bias) each."""
    from resource_accounting.network import get_num_parameters

    return get_num_parameters(nn.Sequential(*(nn.Linear(i, o, bias=bool(b)) for i, o, b in sizes)))


def block_initial_weight(seed: int, dim: int) -> torch.Tensor:
    """The weight of Block(dim) built right after torch.manual_seed(seed)."""
    from resource_accounting.network import Block

    torch.manual_seed(seed)
    return Block(dim).weight.detach()


def deep_network_forward(weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """DeepNetwork(x) with the given block weights."""
    with torch.no_grad():
        return _deep_network(weights)(x)


def build_deep_network(dim: int, num_layers: int) -> int:
    """Construct DeepNetwork(dim, num_layers) (for the invalid-size tests) and count its parameters."""
    from resource_accounting.network import DeepNetwork

    return sum(p.numel() for p in DeepNetwork(dim, num_layers).parameters())


# --- training ---------------------------------------------------------------------------------------

def saved_bytes_deep_network(seed: int, batch: int, dim: int, num_layers: int) -> dict:
    """saved_activation_bytes of a DeepNetwork forward, beside the student's activation_bytes formula."""
    from resource_accounting.network import DeepNetwork, activation_bytes
    from resource_accounting.training import saved_activation_bytes

    torch.manual_seed(seed)
    model = DeepNetwork(dim, num_layers)
    x = torch.randn(batch, dim)
    return {"measured": saved_activation_bytes(model, x), "formula": activation_bytes(batch, dim, num_layers)}


def saved_bytes_shared_storage(seed: int, rows: int, cols: int) -> int:
    """saved_activation_bytes of a function whose saved tensors are three views of one storage."""
    from resource_accounting.training import saved_activation_bytes

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x.exp()  # exp's backward saves its result y
        return y.sin().sum() + y.t().cos().sum() + y.view(-1).log().sum()  # each saves a view of y

    torch.manual_seed(seed)
    return saved_activation_bytes(fn, torch.randn(rows, cols, requires_grad=True))


def saved_bytes_linear(seed: int, batch: int, dim: int) -> int:
    """saved_activation_bytes of relu(Linear(x)) for an input that requires grad (so the weight is saved)."""
    from resource_accounting.training import saved_activation_bytes

    torch.manual_seed(seed)
    layer = nn.Linear(dim, dim, bias=False)
    return saved_activation_bytes(lambda x: torch.relu(layer(x)), torch.randn(batch, dim, requires_grad=True))


OPTIMIZERS = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}


def accumulation_step(weights: list[torch.Tensor], inputs: torch.Tensor, targets: torch.Tensor,
                      optimizer: str, lr: float, num_micro_batches: int) -> dict:
    """accumulated_train_step on an MLP (Linear-Tanh-Linear, float64) whose grads start out nonzero."""
    from resource_accounting.training import accumulated_train_step

    model = nn.Sequential(nn.Linear(weights[0].shape[1], weights[0].shape[0]), nn.Tanh(),
                          nn.Linear(weights[2].shape[1], weights[2].shape[0])).double()
    with torch.no_grad():
        for param, weight in zip(model.parameters(), weights):
            param.copy_(weight)
            param.grad = torch.ones_like(param)  # stale gradients from "an earlier step"
    opt = OPTIMIZERS[optimizer](model.parameters(), lr=lr)
    loss = accumulated_train_step(model, opt, inputs, targets, F.mse_loss, num_micro_batches)
    return {"loss": loss, "params": [p.detach() for p in model.parameters()]}


def checkpointed_output_and_grads(weights: list[torch.Tensor], x: torch.Tensor, grad_output: torch.Tensor,
                                  num_segments: int, input_requires_grad: bool = True) -> dict:
    """checkpointed_forward's output, then the gradients of <output, grad_output> for weights and x.

    With input_requires_grad False, x is plain data (as a training batch is): only the weights need gradients.
    """
    from resource_accounting.training import checkpointed_forward

    model = _deep_network(weights)
    x = x.clone().requires_grad_(input_requires_grad)
    out = checkpointed_forward(model, x, num_segments)
    if out.requires_grad:  # else no weight gets a gradient: the test says which are missing
        out.backward(grad_output)
    return {"output": out.detach(), "weight_grads": [layer.weight.grad for layer in model.layers],
            "input_grad": x.grad}


def checkpointed_saved_bytes(seed: int, batch: int, dim: int, num_layers: int, num_segments: int) -> dict:
    """On one DeepNetwork: saved_activation_bytes of the plain forward, and the bytes checkpointed_forward holds
    when it returns, measured by kernels.memory (what autograd keeps for the backward, and the output: the
    storages it created or wrote that are still alive), never by the submission's own saved_activation_bytes."""
    from kernels.memory import MemoryTracker
    from resource_accounting.network import DeepNetwork
    from resource_accounting.training import checkpointed_forward, saved_activation_bytes

    torch.manual_seed(seed)
    model = DeepNetwork(dim, num_layers)
    x = torch.randn(batch, dim)
    plain = saved_activation_bytes(model, x)
    with MemoryTracker("cpu") as held:
        out = checkpointed_forward(model, x, num_segments)
    del out
    return {"plain": plain, "checkpointed": held.held_bytes}


def checkpointed_with_segments(dim: int, num_layers: int, num_segments: int) -> list[int]:
    """checkpointed_forward with a given number of segments (for the invalid-argument test)."""
    from resource_accounting.network import DeepNetwork
    from resource_accounting.training import checkpointed_forward

    return list(checkpointed_forward(DeepNetwork(dim, num_layers), torch.randn(2, dim), num_segments).shape)


def accumulation_with_micro_batches(batch: int, num_micro_batches: int) -> float:
    """accumulated_train_step on a batch of `batch` rows (for the invalid-argument test)."""
    from resource_accounting.training import accumulated_train_step

    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return accumulated_train_step(model, opt, torch.randn(batch, 3), torch.randn(batch, 1), F.mse_loss,
                                  num_micro_batches)


# What may read a float32 parameter under autocast: casting it to the low dtype, and views of it.
_CASTS = (torch.ops.aten._to_copy, torch.ops.aten.to, torch.ops.aten.t, torch.ops.aten.transpose,
          torch.ops.aten.view, torch.ops.aten.detach, torch.ops.aten.alias, torch.ops.aten.expand,
          torch.ops.aten.permute, torch.ops.aten._unsafe_view)


class _MatmulDtypes(TorchDispatchMode):
    """Records the dtypes of the operands of every aten matmul run while active, and every other op that computes
    with one of `params` (float32 parameters) itself: under autocast a weight is only cast (or viewed)."""

    def __init__(self, params=()) -> None:
        super().__init__()
        self.dtypes: list[torch.dtype] = []
        self.params = {p.untyped_storage().data_ptr() for p in params}
        self.float32_reads: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket in (torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm):
            self.dtypes += [a.dtype for a in args if isinstance(a, torch.Tensor)]
        if self.params and func.overloadpacket not in _CASTS and any(
                isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() in self.params
                for a in (*args, *kwargs.values())):
            self.float32_reads.append(str(func.overloadpacket).rpartition(".")[2])
        return func(*args, **kwargs)


def autocast_output(weights: list[torch.Tensor], x: torch.Tensor) -> dict:
    """autocast_forward's output (in its own dtype), the dtypes its matmuls ran in, and the parameters' dtypes."""
    from resource_accounting.training import autocast_forward

    model = _deep_network(weights)
    with _MatmulDtypes(model.parameters()) as recorder:
        out = autocast_forward(model, x)
    return {"output": out.detach(), "matmul_dtypes": recorder.dtypes, "float32_parameter_ops": recorder.float32_reads,
            "param_dtypes": [p.dtype for p in model.parameters()]}
