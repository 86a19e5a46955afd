"""Scenarios of the hidden resource_accounting tests, and the plain-torch programs they share with the tests.

A *builder* (`tensor_view`, `strided_inputs`, the `*_program` functions, `module_from_spec`,
`accumulation_case`, ...) turns plain data (a seed and a spec the test drew) into torch objects with
torch alone. The worker runs a builder and measures the result with the student's code; the trusted
side runs the same builder on the same data and measures it with torch's own tools (FlopCounterMode,
`parameters()`, a float64 forward) or with the reference solution. Builders never import student code.

Scenarios import the student's packages inside their bodies and return plain data only. This module
may import only the standard library, torch, einops, numpy, kernels and the student's packages: when
grading it runs in the sandboxed worker. `kernels` comes first so that Triton is in the right mode
before a dispatch mode makes torch import it.
"""

import kernels  # noqa: F401  (selects Triton's mode before torch's dispatch modes import Triton)
import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

# --- builders: memory ---------------------------------------------------------------------------------

VIEWS = ("none", "transpose", "permute", "slice", "narrow", "select", "expand", "diagonal", "unsqueeze")


def tensor_view(shape: list[int], dtype: str, device: str, view: str) -> torch.Tensor:
    """A tensor of `shape` and dtype `torch.<dtype>` on `device` ("cpu" or "meta"), seen through `view`.

    Views are not contiguous (except "none", "select" and "unsqueeze"); "expand" has stride 0.
    """
    base = torch.empty(*shape, dtype=getattr(torch, dtype), device=device)
    if view == "transpose":
        return base.transpose(0, -1)
    if view == "permute":
        return base.permute(*reversed(range(base.dim())))
    if view == "slice":
        return base[..., ::2]
    if view == "narrow":
        return base.narrow(0, 1, base.shape[0] - 1)
    if view == "select":
        return base[-1]
    if view == "expand":
        return base.unsqueeze(0).expand(3, *shape)
    if view == "diagonal":
        return base.diagonal(dim1=0, dim2=-1)
    if view == "unsqueeze":
        return base.unsqueeze(1)
    return base


def strided_inputs(seed: int, lead: list[int], seq1: int, seq2: int, hidden: int, heads: int) -> tuple:
    """q (*lead, seq1, hidden), k (*lead, seq2, hidden), x (*lead, seq1, heads·hidden) and y (*lead, heads,
    seq1, hidden), each the transpose of a contiguous tensor: none of them is contiguous."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, hidden, seq1, generator=gen, dtype=torch.float64).transpose(-1, -2)
    k = torch.randn(*lead, hidden, seq2, generator=gen, dtype=torch.float64).transpose(-1, -2)
    x = torch.randn(*lead, heads * hidden, seq1, generator=gen).transpose(-1, -2)
    y = torch.randn(*lead, heads, hidden, seq1, generator=gen).transpose(-1, -2)
    return q, k, x, y


# --- builders: FLOP programs --------------------------------------------------------------------------

def matmul_program(seed: int, ops: list[dict], backward: bool) -> Callable[[], None]:
    """The inputs of a mix of matmul ops (built now, seeded) and a function that runs them.

    Each op is {"kind", "lead", "m", "n", "p", "grad": [a, b, bias], "bias", "alpha", "beta"}:
    mm, addmm, bmm and baddbmm called directly, and matmul, linear and einsum, which torch lowers to
    them. With `backward`, the sum of all outputs that require grad is backpropagated.
    """
    gen = torch.Generator().manual_seed(seed)

    def leaf(shape, grad: bool) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).requires_grad_(grad)

    calls = [_matmul_call(op, leaf) for op in ops]

    def run() -> None:
        outputs = [call() for call in calls]
        live = [out.sum() for out in outputs if out.requires_grad]
        if backward and live:
            torch.stack(live).sum().backward()

    return run


def _matmul_call(op: dict, leaf) -> Callable[[], torch.Tensor]:
    kind, lead, (m, n, p) = op["kind"], list(op["lead"]), (op["m"], op["n"], op["p"])
    ga, gb, gc = op["grad"]
    bias = {"row": [p], "full": [m, p], "batched": lead[:1] + [m, p]}.get(op["bias"])
    if kind == "mm":
        a, b = leaf([m, n], ga), leaf([n, p], gb)
        return lambda: torch.mm(a, b)
    if kind == "addmm":
        c, a, b = leaf(bias, gc), leaf([m, n], ga), leaf([n, p], gb)
        return lambda: torch.addmm(c, a, b, beta=op["beta"], alpha=op["alpha"])
    if kind == "bmm":
        a, b = leaf(lead[:1] + [m, n], ga), leaf(lead[:1] + [n, p], gb)
        return lambda: torch.bmm(a, b)
    if kind == "baddbmm":
        c, a, b = leaf(bias, gc), leaf(lead[:1] + [m, n], ga), leaf(lead[:1] + [n, p], gb)
        return lambda: torch.baddbmm(c, a, b, beta=op["beta"], alpha=op["alpha"])
    if kind == "matmul":
        a, b = leaf(lead + [m, n], ga), leaf((lead if op["bias"] == "batched" else []) + [n, p], gb)
        return lambda: a @ b
    if kind == "linear":
        x, w = leaf(lead + [m, n], ga), leaf([p, n], gb)
        c = leaf(bias, gc) if bias else None
        return lambda: F.linear(x, w, c)
    if kind == "einsum":
        a, b = leaf(lead + [m, n], ga), leaf(lead + [n, p], gb)
        return lambda: torch.einsum("...mn,...np->...mp", a, b)
    raise ValueError(f"unknown matmul kind {kind!r}")


ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "silu": nn.SiLU}


def mlp_program(seed: int, dims: list[int], bias: list[bool], activation: str, lead: list[int],
                input_grad: bool) -> Callable[[], None]:
    """An MLP (Linear layers of widths `dims`, `activation` between) and its forward and backward of the sum."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(dims, dims[1:])):
        layers += [ACTIVATIONS[activation]()] if i else []
        layers.append(nn.Linear(fan_in, fan_out, bias=bias[i]))
    model = nn.Sequential(*layers)
    x = torch.randn(*lead, dims[0]).requires_grad_(input_grad)
    return lambda: model(x).sum().backward()


class _Attention(nn.Module):
    """Multi-head self-attention written with plain matmuls: projections, q kᵀ, softmax, · v, output."""

    def __init__(self, heads: int, head_dim: int, bias: bool) -> None:
        super().__init__()
        self.heads, width = heads, heads * head_dim
        self.qkv = nn.Linear(width, 3 * width, bias=bias)
        self.out = nn.Linear(width, width, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *lead, seq, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=-1)
        q, k, v = (t.reshape(*lead, seq, self.heads, -1).transpose(-2, -3) for t in (q, k, v))
        scores = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        return self.out((scores @ v).transpose(-2, -3).reshape(*lead, seq, width))


def attention_program(seed: int, lead: list[int], seq: int, heads: int, head_dim: int, bias: bool,
                      input_grad: bool) -> Callable[[], None]:
    """A multi-head attention layer on x of shape (*lead, seq, heads·head_dim), forward and backward."""
    torch.manual_seed(seed)
    model = _Attention(heads, head_dim, bias)
    x = torch.randn(*lead, seq, heads * head_dim).requires_grad_(input_grad)
    return lambda: model(x).sum().backward()


def elementwise_program(seed: int, ops: list[dict]) -> Callable[[], None]:
    """A mix of elementwise ops without autograd; each op is {"op", "form", "a", "b", "scalar"}.

    Forms: "operator" (a + b), "function" (torch.add(a, b, alpha=...)), "alias" (torch.multiply ...),
    "scalar" (a * 2.5), "inplace" (a.add_(b): not counted), "other" (exp, neg, relu, sum, rsub and addcmul:
    not counted), "matmul" (a @ b: counted as a matmul).
    """
    gen = torch.Generator().manual_seed(seed)
    calls = []
    for op in ops:
        a, b = torch.randn(*op["a"], generator=gen), torch.randn(*op["b"], generator=gen)
        calls.append(_elementwise_call(op, a, b))

    def run() -> None:
        for call in calls:
            call()

    return run


_OPERATORS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
              "div": lambda a, b: a / b}
_FUNCTIONS = {"add": lambda a, b: torch.add(a, b, alpha=0.5), "sub": lambda a, b: torch.sub(a, b, alpha=2),
              "mul": torch.mul, "div": torch.div}
_ALIASES = {"add": lambda a, b: a.add(b), "sub": torch.subtract, "mul": torch.multiply, "div": torch.true_divide}
_INPLACE = {"add": lambda a, b: a.add_(b), "sub": lambda a, b: a.sub_(b), "mul": lambda a, b: a.mul_(b),
            "div": lambda a, b: a.div_(b)}
# Not counted: other elementwise ops (relu is elementwise too, but not one of the four), a reduction, and
# the ops whose names start like a counted one (rsub, from `2.5 - a`; addcmul): a FlopCounter that counts
# them (by name prefix, say) is wrong.
_OTHERS = {"exp": lambda a, b: a.exp(), "neg": lambda a, b: -a, "relu": lambda a, b: torch.relu(a),
           "sum": lambda a, b: a.sum(), "rsub": lambda a, b: 2.5 - a, "addcmul": lambda a, b: torch.addcmul(a, a, a)}
UNCOUNTED = tuple(_OTHERS)


def _elementwise_call(op: dict, a: torch.Tensor, b: torch.Tensor) -> Callable[[], object]:
    form, name = op["form"], op["op"]
    if form == "operator":
        return lambda: _OPERATORS[name](a, b)
    if form == "function":
        return lambda: _FUNCTIONS[name](a, b)
    if form == "alias":
        return lambda: _ALIASES[name](a, b)
    if form == "scalar":
        return lambda: _OPERATORS[name](a, op["scalar"])
    if form == "inplace":
        return lambda: _INPLACE[name](a, b)
    if form == "other":
        return lambda: _OTHERS[name](a, b)
    if form == "matmul":
        return lambda: a @ b
    raise ValueError(f"unknown elementwise form {form!r}")


def scaled_residual_program(seed: int, rows: int, dim: int, layers: int, input_grad: bool) -> Callable[[], None]:
    """Layers of h = (h @ W) * gate + bias, then h / 2 - h.mean(), and the mean of h² backpropagated.

    Matmuls and elementwise ops in the forward and in the backward (autograd's own mul, div and add).
    """
    gen = torch.Generator().manual_seed(seed)
    params = [(torch.randn(dim, dim, generator=gen).requires_grad_(),
               torch.randn(1, dim, generator=gen).requires_grad_(),
               torch.randn(dim, generator=gen).requires_grad_()) for _ in range(layers)]
    x = torch.randn(rows, dim, generator=gen).requires_grad_(input_grad)

    def run() -> None:
        h = x
        for weight, gate, bias in params:
            h = (h @ weight) * gate + bias
            h = h / 2.0 - h.mean()
        (h * h).mean().backward()

    return run


PROGRAMS = {"matmul": matmul_program, "mlp": mlp_program, "attention": attention_program,
            "elementwise": elementwise_program, "scaled_residual": scaled_residual_program}


def program(kind: str, spec: dict) -> Callable[[], None]:
    """The program `kind` built from `spec` (a seed and the builder's keyword arguments)."""
    return PROGRAMS[kind](**spec)


# --- builders: modules --------------------------------------------------------------------------------

def module_from_spec(seed: int, layers: list[dict]) -> nn.Module:
    """An nn.Module of assorted layers: each {"kind", ...sizes}; "tied" shares a weight, "frozen" freezes one.

    Kinds: linear (in, out, bias), conv (in, out, k, bias), embedding (num, dim), layernorm (dim,
    affine), batchnorm (dim: buffers are not parameters), tied (num, dim: an Embedding and a Linear
    sharing one weight), frozen (in, out: a Linear with requires_grad False), nested (in, out: a
    Sequential inside a ModuleDict).
    """
    torch.manual_seed(seed)
    modules = nn.ModuleList()
    for spec in layers:
        kind = spec["kind"]
        if kind == "linear":
            modules.append(nn.Linear(spec["in"], spec["out"], bias=spec["bias"]))
        elif kind == "conv":
            modules.append(nn.Conv2d(spec["in"], spec["out"], spec["k"], bias=spec["bias"]))
        elif kind == "embedding":
            modules.append(nn.Embedding(spec["num"], spec["dim"]))
        elif kind == "layernorm":
            modules.append(nn.LayerNorm(spec["dim"], elementwise_affine=spec["affine"]))
        elif kind == "batchnorm":
            modules.append(nn.BatchNorm1d(spec["dim"]))
        elif kind == "tied":
            embedding, head = nn.Embedding(spec["num"], spec["dim"]), nn.Linear(spec["dim"], spec["num"], bias=False)
            head.weight = embedding.weight
            modules.append(nn.ModuleList([embedding, head]))
        elif kind == "frozen":
            frozen = nn.Linear(spec["in"], spec["out"])
            frozen.requires_grad_(False)
            modules.append(frozen)
        elif kind == "nested":
            modules.append(nn.ModuleDict({"block": nn.Sequential(nn.Linear(spec["in"], spec["out"]), nn.ReLU())}))
        else:
            raise ValueError(f"unknown layer kind {kind!r}")
    return modules


# --- builders: saved activations ----------------------------------------------------------------------

def saved_views_program(seed: int, tensors: list[dict]) -> tuple[Callable, list[torch.Tensor]]:
    """(fn, args): fn computes y_i = x_i.exp() (saved by exp) and saves views of y_i through sin.

    Each tensor spec is {"shape", "dtype", "views": [...]} with views among "t", "slice", "flat",
    "row", "same"; every view shares y_i's storage, so only y_i's storage counts.
    """
    gen = torch.Generator().manual_seed(seed)
    args = [torch.randn(*t["shape"], generator=gen).to(getattr(torch, t["dtype"])).requires_grad_() for t in tensors]
    views = {"t": lambda y: y.transpose(0, -1), "slice": lambda y: y[..., 1:], "flat": lambda y: y.reshape(-1),
             "row": lambda y: y[0], "same": lambda y: y}

    def fn(*xs: torch.Tensor) -> torch.Tensor:
        total = 0
        for x, spec in zip(xs, tensors):
            y = x.exp()
            total = total + y.float().sum()
            for view in spec["views"]:
                total = total + views[view](y).sin().float().sum()
        return total

    return fn, args


def saved_inputs_program(seed: int, shapes: list[list[int]]) -> tuple[Callable, list[torch.Tensor]]:
    """(fn, args): fn multiplies the inputs pairwise in a chain, a_0 * a_1, then · a_2, ...

    mul saves both of its operands: every input (a leaf that requires grad, not a parameter) and
    every intermediate product but the last is saved.
    """
    gen = torch.Generator().manual_seed(seed)
    args = [torch.randn(*shape, generator=gen).requires_grad_() for shape in shapes]

    def fn(*xs: torch.Tensor) -> torch.Tensor:
        out = xs[0]
        for x in xs[1:]:
            out = out * x
        return out.sum()

    return fn, args


def saved_mlp_program(seed: int, dims: list[int], lead: list[int], input_grad: bool) -> tuple[Callable, list]:
    """(model, [x]): Linear layers of widths `dims` (with bias) and ReLUs between, on x of shape (*lead, dims[0])."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(dims, dims[1:])):
        layers += [nn.ReLU()] if i else []
        layers.append(nn.Linear(fan_in, fan_out))
    return nn.Sequential(*layers), [torch.randn(*lead, dims[0]).requires_grad_(input_grad)]


def saved_autocast_program(seed: int, dim: int, num_layers: int, rows: int,
                           input_grad: bool) -> tuple[Callable, list]:
    """(fn, [x]): relu(h @ W) chained over nn.Parameters under CPU bf16 autocast (bf16 copies are saved)."""
    gen = torch.Generator().manual_seed(seed)
    weights = nn.ParameterList(nn.Parameter(torch.randn(dim, dim, generator=gen)) for _ in range(num_layers))

    def fn(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            for weight in weights:
                x = torch.relu(x @ weight)
        return x

    return fn, [torch.randn(rows, dim, generator=gen).requires_grad_(input_grad)]


def saved_mix_program(seed: int, rows: int, dim: int, ops: list[str]) -> tuple[Callable, list]:
    """(fn, [x]): a chain of assorted ops (Linear, activations, norms, views, casts) on x of (rows, dim)."""
    torch.manual_seed(seed)
    linear, norm = nn.Linear(dim, dim), nn.LayerNorm(dim)
    steps = {"linear": linear, "norm": norm, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "gelu": F.gelu,
             "square": lambda h: h * h, "transpose": lambda h: h.t().contiguous().t(),
             "softmax": lambda h: torch.softmax(h, dim=-1), "double": lambda h: h.double().float(),
             "residual": lambda h: h + linear(h), "slice": lambda h: torch.cat([h[:, 1:], h[:, :1]], dim=1)}

    def fn(x: torch.Tensor) -> torch.Tensor:
        for op in ops:
            x = steps[op](x)
        return x.sum()

    return fn, [torch.randn(rows, dim).requires_grad_()]


SAVED_PROGRAMS = {"views": saved_views_program, "inputs": saved_inputs_program, "mlp": saved_mlp_program,
                  "autocast": saved_autocast_program, "mix": saved_mix_program}


def saved_program(kind: str, spec: dict) -> tuple[Callable, list]:
    return SAVED_PROGRAMS[kind](**spec)


# --- builders: training ---------------------------------------------------------------------------------

LOSSES = {"mse": F.mse_loss, "l1": F.l1_loss, "huber": F.smooth_l1_loss, "cross_entropy": F.cross_entropy}


def accumulation_case(seed: int, widths: list[int], activation: str, loss: str, batch: int) -> dict:
    """A float64 MLP (Linear layers of `widths`, `activation` between), a batch and its targets, from a seed.

    For "cross_entropy" the targets are class indices in [0, widths[-1]); otherwise real vectors.
    """
    gen = torch.Generator().manual_seed(seed)
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
        layers += [ACTIVATIONS[activation]()] if i else []
        layers.append(nn.Linear(fan_in, fan_out))
    model = nn.Sequential(*layers).double()
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=gen, dtype=torch.float64) / math.sqrt(param.shape[-1]))
    inputs = torch.randn(batch, widths[0], generator=gen, dtype=torch.float64)
    if loss == "cross_entropy":
        targets = torch.randint(0, widths[-1], (batch,), generator=gen)
    else:
        targets = torch.randn(batch, widths[-1], generator=gen, dtype=torch.float64)
    return {"model": model, "inputs": inputs, "targets": targets, "loss_fn": LOSSES[loss]}


def optimizer_for(model: nn.Module, name: str, hyper: dict) -> torch.optim.Optimizer:
    """torch.optim.SGD or AdamW over the model's parameters with the drawn hyperparameters."""
    cls = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}[name]
    return cls(model.parameters(), **hyper)


def _deep_network(weights: list[torch.Tensor]):
    """The student's DeepNetwork with its blocks' weights set to `weights` (in their dtype)."""
    from resource_accounting.network import DeepNetwork

    model = DeepNetwork(weights[0].shape[0], len(weights)).to(weights[0].dtype)
    with torch.no_grad():
        for layer, weight in zip(model.layers, weights):
            layer.weight.copy_(weight)
    return model


# === scenarios: memory ===================================================================================

def memory_of_views(specs: list[dict]) -> list[int]:
    """get_memory_usage of each tensor_view(**spec), built here (views do not survive the wire)."""
    from resource_accounting.memory import get_memory_usage

    return [get_memory_usage(tensor_view(**spec)) for spec in specs]


def float_format_by_name(dtype: str) -> dict:
    """float_format(torch.<dtype>) as a tuple, and its three fields read by name."""
    from resource_accounting.memory import float_format

    got = float_format(getattr(torch, dtype))
    return {"tuple": tuple(got), "by_name": [got.sign_bits, got.exponent_bits, got.mantissa_bits]}


def float_format_of(dtype: str) -> tuple:
    """float_format(torch.<dtype>), for dtypes that cannot cross the wire (complex, other float8 kinds)."""
    from resource_accounting.memory import float_format

    return tuple(float_format(getattr(torch, dtype)))


def underflows_of(dtype: str, values: list[float]) -> list:
    """underflows_to_zero(value, torch.<dtype>) for each value (dtypes that cannot cross the wire)."""
    from resource_accounting.memory import underflows_to_zero

    return [underflows_to_zero(value, getattr(torch, dtype)) for value in values]


# === scenarios: einops ===================================================================================

def einops_on_strided(function: str, seed: int, lead: list[int], seq1: int, seq2: int, hidden: int,
                      heads: int) -> torch.Tensor:
    """attention_scores(q, k), split_heads(x, heads) or merge_heads(y) on the non-contiguous strided_inputs."""
    from resource_accounting import einops_ops

    q, k, x, y = strided_inputs(seed, lead, seq1, seq2, hidden, heads)
    if function == "attention_scores":
        return einops_ops.attention_scores(q, k)
    return einops_ops.split_heads(x, heads) if function == "split_heads" else einops_ops.merge_heads(y)


# === scenarios: flops ====================================================================================

def _counts(counter) -> dict:
    return {"total": counter.total_flops, "by_op": dict(counter.flops_by_op)}


def count_program(kind: str, spec: dict, count_elementwise: bool = False) -> dict:
    """FlopCounter(count_elementwise) around program(kind, spec) (built before the counter is entered)."""
    from resource_accounting.flops import FlopCounter

    run = program(kind, spec)
    with FlopCounter(count_elementwise=count_elementwise) as counter:
        run()
    return _counts(counter)


def count_two_programs(first: list, second: list, between: list) -> dict:
    """Two FlopCounters, one after the other, each around its own program; `between` runs outside both."""
    from resource_accounting.flops import FlopCounter

    runs = [program(kind, spec) for kind, spec in (first, between, second)]
    one = FlopCounter()
    with one:
        runs[0]()
    runs[1]()
    two = FlopCounter()
    with two:
        runs[2]()
    runs[1]()
    return {"first": _counts(one), "second": _counts(two)}


def count_program_on(kind: str, spec: dict, device: str) -> dict:
    """FlopCounter around program(kind, spec) after moving its tensors to `device` (default device set)."""
    from resource_accounting.flops import FlopCounter

    with torch.device(device):
        run = program(kind, spec)
        with FlopCounter() as counter:
            run()
    return _counts(counter)


# === scenarios: network ==================================================================================

def deep_network_layout(dim: int, num_layers: int) -> dict:
    """get_num_parameters of DeepNetwork(dim, num_layers), its layers' type and its parameters' names and shapes."""
    from resource_accounting.network import DeepNetwork, get_num_parameters

    model = DeepNetwork(dim, num_layers)
    return {"count": get_num_parameters(model), "module_list": type(model.layers) is nn.ModuleList,
            "blocks": len(model.layers),
            "parameters": {name: [list(p.shape), type(p) is nn.Parameter, p.dtype]
                           for name, p in model.named_parameters()}}


def module_parameters(seed: int, layers: list[dict]) -> int:
    """get_num_parameters of module_from_spec(seed, layers)."""
    from resource_accounting.network import get_num_parameters

    return get_num_parameters(module_from_spec(seed, layers))


def block_weights_after_seed(seed: int, dims: list[int]) -> list[torch.Tensor]:
    """Block(dim).weight for each dim, each built right after torch.manual_seed(seed)."""
    from resource_accounting.network import Block

    weights = []
    for dim in dims:
        torch.manual_seed(seed)
        weights.append(Block(dim).weight.detach())
    return weights


def block_forward(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Block(dim) with its weight set to `weight`, applied to x."""
    from resource_accounting.network import Block

    block = Block(weight.shape[0])
    with torch.no_grad():
        block.weight.copy_(weight)
        return block(x)


def deep_network_forward(weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """DeepNetwork(x) with the given block weights (in the weights' dtype)."""
    with torch.no_grad():
        return _deep_network(weights)(x)


def deep_network_saved(seed: int, lead: list[int], dim: int, num_layers: int, dtype: torch.dtype,
                       input_grad: bool) -> dict:
    """saved_activation_bytes of a DeepNetwork forward in `dtype`, beside activation_bytes for its sizes."""
    from resource_accounting.network import DeepNetwork, activation_bytes
    from resource_accounting.training import saved_activation_bytes

    torch.manual_seed(seed)
    model = DeepNetwork(dim, num_layers).to(dtype)
    x = torch.randn(*lead, dim, dtype=dtype).requires_grad_(input_grad)
    rows = math.prod(lead)
    return {"measured": saved_activation_bytes(model, x),
            "formula": activation_bytes(rows, dim, num_layers, bytes_per_element=x.element_size())}


def build_deep_network(dim, num_layers) -> int:
    """Construct DeepNetwork(dim, num_layers) (for the invalid-size tests) and count its parameters."""
    from resource_accounting.network import DeepNetwork

    return sum(p.numel() for p in DeepNetwork(dim, num_layers).parameters())


# === scenarios: training =================================================================================

def saved_bytes(kind: str, spec: dict) -> int:
    """saved_activation_bytes(fn, *args) for (fn, args) = saved_program(kind, spec)."""
    from resource_accounting.training import saved_activation_bytes

    fn, args = saved_program(kind, spec)
    return saved_activation_bytes(fn, *args)


# The products aten runs for a Linear layer's forward (nn.Linear, F.linear, x @ w.T, however reached).
_PRODUCTS = (torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm, torch.ops.aten.baddbmm, torch.ops.aten.mv,
             torch.ops.aten.addmv, torch.ops.aten.linear, torch.ops.aten.matmul, torch.ops.aten.dot)


class _Recorder(TorchDispatchMode):
    """Counts optimizer steps (a post-step hook) and, while active, records the input of every grad-enabled product
    with the first layer's weight, as aten runs it: a forward through that layer is seen however the code reaches
    it (the module, its `forward`, which skips the module's hooks, or F.linear on its weight). A backward runs with
    grad disabled, so its products with the weight are not forwards."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        super().__init__()
        self.steps, self.rows = 0, []
        optimizer.register_step_post_hook(self._stepped)
        first = model[0]
        self.weight = first.weight.untyped_storage().data_ptr()
        self.bias = None if first.bias is None else first.bias.untyped_storage().data_ptr()

    def _stepped(self, optimizer, args, kwargs) -> None:
        self.steps += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.is_grad_enabled() and func.overloadpacket in _PRODUCTS:
            tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            storages = [t.untyped_storage().data_ptr() for t in tensors]
            if self.weight in storages:
                others = [t for t, s in zip(tensors, storages) if s not in (self.weight, self.bias)]
                self.rows.append(others[0].detach().clone() if len(others) == 1 else torch.empty(0))
        return func(*args, **kwargs)


def accumulation(case: dict, optimizer: str, hyper: dict, num_micro_batches: int, stale: bool,
                 stale_seed: int) -> dict:
    """accumulated_train_step on accumulation_case(**case), with stale random gradients when `stale`.

    Returns the loss, the parameters after the call, the number of optimizer steps taken and the
    inputs of every grad-enabled forward through the first layer (the micro-batches, in order).
    """
    from resource_accounting.training import accumulated_train_step

    built = accumulation_case(**case)
    model = built["model"]
    opt = optimizer_for(model, optimizer, hyper)
    if stale:
        gen = torch.Generator().manual_seed(stale_seed)
        for param in model.parameters():
            param.grad = torch.randn(param.shape, generator=gen, dtype=param.dtype) * 10
    recorder = _Recorder(model, opt)
    with recorder:
        loss = accumulated_train_step(model, opt, built["inputs"], built["targets"], built["loss_fn"],
                                      num_micro_batches)
    return {"loss": loss, "params": [p.detach() for p in model.parameters()], "steps": recorder.steps,
            "micro_batches": recorder.rows}


def accumulation_invalid(batch: int, target_batch: int, num_micro_batches) -> dict:
    """accumulated_train_step on a Linear(3, 2) with `batch` input rows and `target_batch` target rows."""
    from resource_accounting.training import accumulated_train_step

    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return {"loss": accumulated_train_step(model, opt, torch.randn(batch, 3), torch.randn(target_batch, 2),
                                           F.mse_loss, num_micro_batches)}


def checkpointed_grads(weights: list[torch.Tensor], x: torch.Tensor, grad_output: torch.Tensor,
                       num_segments: int, input_requires_grad: bool = True) -> dict:
    """checkpointed_forward's output, then the gradients of <output, grad_output> for the weights and x.

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


def checkpointed_bytes(seed: int, batch: int, dim: int, num_layers: int, num_segments: int) -> dict:
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


def checkpointed_invalid(dim: int, num_layers: int, num_segments) -> list[int]:
    """checkpointed_forward with a given number of segments (for the invalid-argument test)."""
    from resource_accounting.network import DeepNetwork
    from resource_accounting.training import checkpointed_forward

    return list(checkpointed_forward(DeepNetwork(dim, num_layers), torch.randn(2, dim), num_segments).shape)


# What may read a float32 parameter under autocast: casting it to the low dtype, and views of it.
_CASTS = (torch.ops.aten._to_copy, torch.ops.aten.to, torch.ops.aten.t, torch.ops.aten.transpose,
          torch.ops.aten.view, torch.ops.aten.detach, torch.ops.aten.alias, torch.ops.aten.expand,
          torch.ops.aten.permute, torch.ops.aten._unsafe_view)


class _MatmulDtypes(TorchDispatchMode):
    """Records the dtypes of the tensor operands of every aten matmul run while active, and every other op that
    computes with one of `params` (float32 parameters) itself: under autocast each is only cast to the low dtype
    (or viewed), and the products read the copy. So a forward that computes in float32 by another op (a multiply
    and a sum) beside one low-precision matmul for show is seen."""

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


def autocast_run(weights: list[torch.Tensor], x: torch.Tensor, dtype: torch.dtype, device: str = "cpu") -> dict:
    """autocast_forward on `device`: output, matmul operand dtypes, parameter dtypes, and the state after.

    After the call: whether autocast is still enabled, and the dtype of a plain float32 matmul.
    """
    from resource_accounting.training import autocast_forward

    model = _deep_network(weights).to(device)
    x = x.to(device)
    with _MatmulDtypes(model.parameters()) as recorder:
        out = autocast_forward(model, x, dtype)
    after = (x @ x.transpose(-1, -2)).dtype
    return {"output": out.detach(), "device": out.device.type, "matmul_dtypes": recorder.dtypes,
            "float32_parameter_ops": recorder.float32_reads,
            "param_dtypes": [p.dtype for p in model.parameters()], "input_dtype": x.dtype,
            "still_enabled": torch.is_autocast_enabled(device), "after": after}


def autocast_invalid(dtype: torch.dtype) -> list[int]:
    """autocast_forward with an unsupported dtype (for the invalid-argument test)."""
    from resource_accounting.training import autocast_forward

    return list(autocast_forward(_deep_network([torch.eye(4)]), torch.randn(2, 4), dtype).shape)
