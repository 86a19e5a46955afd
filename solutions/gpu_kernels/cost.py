"""What the three kernels cost (FLOPs and HBM bytes), what fusion saves, and how tiles fill the SMs.

Counting rules (handout §5 Counting FLOPs and bytes): a kernel reads each of its inputs from HBM once
and writes each of its outputs once, the ideal that caches and tiling aim at; FLOPs count the
arithmetic of the operation, one per add, multiply, compare, exp or tanh-sized step as the constants
below say. Wave quantisation (handout §6): one tile per SM at a time, every tile taking the same time.
"""

from __future__ import annotations

import torch

# FLOPs per element, as the lecture counts them (handout §5).
GELU_FLOPS_PER_ELEMENT = 20  # the tanh approximation, as the lecture counts it
RELU_FLOPS_PER_ELEMENT = 1  # one max(x, 0)
SOFTMAX_FLOPS_PER_ELEMENT = 5  # max, subtract, exp, sum, divide
BIAS_FLOPS_PER_ELEMENT = 1  # one add
ACTIVATION_FLOPS_PER_ELEMENT = {None: 0, "gelu": GELU_FLOPS_PER_ELEMENT, "relu": RELU_FLOPS_PER_ELEMENT}


def _count(name: str, value, minimum: int = 1) -> int:
    """A whole-number argument (an int, not a bool) of at least `minimum`, else ValueError naming it."""
    if type(value) is not int or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _element_bytes(dtype) -> int:
    """Bytes per element of a torch floating-point dtype (float32: 4, bfloat16 and float16: 2)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a torch floating-point dtype such as torch.bfloat16, got {dtype!r}")
    return dtype.itemsize


def elementwise_cost(numel: int, dtype, flops_per_element: int = GELU_FLOPS_PER_ELEMENT) -> tuple[int, int]:
    """(FLOPs, HBM bytes) of an elementwise kernel over `numel` elements: x read once, y written once.

    FLOPs numel·flops_per_element (GeLU by default); bytes 2·numel·element size.

    Handout: §5 Counting FLOPs and bytes
    """
    ### BEGIN SOLUTION
    numel = _count("numel", numel)
    flops_per_element = _count("flops_per_element", flops_per_element, minimum=0)
    return numel * flops_per_element, 2 * numel * _element_bytes(dtype)
    ### END SOLUTION


def softmax_cost(rows: int, cols: int, dtype, passes: int = 1) -> tuple[int, int]:
    """(FLOPs, HBM bytes) of a row softmax of a (rows, cols) matrix that reads x `passes` times.

    FLOPs 5 per element whatever the passes; bytes (passes + 1)·rows·cols·element size (x read
    `passes` times, the output written once).

    Handout: §5 Counting FLOPs and bytes
    """
    ### BEGIN SOLUTION
    elements = _count("rows", rows) * _count("cols", cols)
    passes = _count("passes", passes)
    return SOFTMAX_FLOPS_PER_ELEMENT * elements, (passes + 1) * elements * _element_bytes(dtype)
    ### END SOLUTION


def matmul_cost(m: int, n: int, k: int, dtype, bias: bool = False, activation: str | None = None) -> tuple[int, int]:
    """(FLOPs, HBM bytes) of C = act(A @ B + bias), A (m, k), B (k, n), bias (n,), in one kernel.

    FLOPs 2·m·n·k, plus m·n for the bias and m·n times the activation's FLOPs per element; bytes: A, B,
    the bias and C once each, (m·k + k·n + m·n [+ n])·element size.

    Handout: §5 Counting FLOPs and bytes
    """
    ### BEGIN SOLUTION
    m, n, k = _count("m", m), _count("n", n), _count("k", k)
    if type(bias) is not bool:
        raise ValueError(f"bias must be True or False, got {bias!r}")
    if activation not in ACTIVATION_FLOPS_PER_ELEMENT:
        raise ValueError(f"activation must be None, 'gelu' or 'relu', got {activation!r}")
    flops = 2 * m * n * k + m * n * (BIAS_FLOPS_PER_ELEMENT * bias + ACTIVATION_FLOPS_PER_ELEMENT[activation])
    elements = m * k + k * n + m * n + (n if bias else 0)
    return flops, elements * _element_bytes(dtype)
    ### END SOLUTION


def fusion_savings(m: int, n: int, k: int, dtype) -> int:
    """HBM bytes the unfused sequence (matmul, then + bias, then GeLU: three kernels) moves beyond the
    fused kernel's: each unfused intermediate of m·n elements is written once and read once more.

    Handout: §5 Counting FLOPs and bytes
    """
    ### BEGIN SOLUTION
    size = _element_bytes(dtype)
    _, fused = matmul_cost(m, n, k, dtype, bias=True, activation="gelu")
    _, product = matmul_cost(m, n, k, dtype)
    add_bias = (2 * m * n + n) * size  # reads C and the bias, writes C + bias
    _, gelu = elementwise_cost(m * n, dtype)  # reads C + bias, writes the output
    return product + add_bias + gelu - fused
    ### END SOLUTION


def tiles(m: int, n: int, tile_m: int, tile_n: int) -> int:
    """Output tiles of an (m, n) result cut into tile_m × tile_n blocks, partial tiles at the edges included.

    Handout: §6 Wave quantisation
    """
    ### BEGIN SOLUTION
    m, n, tile_m, tile_n = _count("m", m), _count("n", n), _count("tile_m", tile_m), _count("tile_n", tile_n)
    return -(-m // tile_m) * -(-n // tile_n)  # ceil divisions in exact integer arithmetic
    ### END SOLUTION


def waves(m: int, n: int, tile_m: int, tile_n: int, num_sms: int) -> int:
    """Rounds of at most one tile per SM that run all the tiles: ceil(tiles / num_sms).

    Handout: §6 Wave quantisation
    """
    ### BEGIN SOLUTION
    return -(-tiles(m, n, tile_m, tile_n) // _count("num_sms", num_sms))
    ### END SOLUTION


def tile_efficiency(m: int, n: int, tile_m: int, tile_n: int, num_sms: int) -> float:
    """Useful work over work paid for: m·n / (waves · num_sms · tile_m · tile_n).

    The padding of partial tiles and the SMs left idle in the last wave both count as paid, not useful.

    Handout: §6 Wave quantisation
    """
    ### BEGIN SOLUTION
    rounds = waves(m, n, tile_m, tile_n, num_sms)
    return m * n / (rounds * num_sms * tile_m * tile_n)
    ### END SOLUTION
