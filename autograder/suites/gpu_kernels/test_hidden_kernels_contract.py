"""Hidden: the TypeErrors and ValueErrors of the kernels' contracts (handout §2 to §4), at random shapes.

Each test draws fresh bad arguments from the run's seed. Any exception other than the one the handout
names fails, and so does a call that returns.
"""

import pytest
import torch

pytestmark = pytest.mark.visibility("hidden")

ELEMENTWISE = "gpu_kernels.elementwise"
SOFTMAX = "gpu_kernels.softmax"
MATMUL = "gpu_kernels.matmul"
NOT_FLOAT = (torch.int32, torch.int64, torch.bool, torch.float64, torch.uint8)


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("elementwise.gelu_triton")
def test_gelu_rejects_random_tensors_it_cannot_compute(student, trusted, rng):
    """gelu_triton raises TypeError for tensors of a random shape in int32, int64, bool, float64 or uint8, and
    for a list of numbers."""
    gelu = student.module(ELEMENTWISE).gelu_triton
    shape = trusted.draw_shape(rng)
    for dtype in NOT_FLOAT:
        trusted.error(f"gelu_triton of a {dtype} tensor", (TypeError,), lambda: gelu(torch.zeros(shape, dtype=dtype)))
    trusted.error("gelu_triton of a list", (TypeError,), lambda: gelu([0.5] * shape[0]))


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("softmax.softmax_triton")
def test_softmax_rejects_random_bad_arguments(student, trusted, rng):
    """softmax_triton raises TypeError for non-float tensors, ValueError for a 0-d tensor and for a block_size
    below 16 or not a power of two (random sizes)."""
    softmax = student.module(SOFTMAX).softmax_triton
    shape = (*trusted.draw_shape(rng, ranks=(0, 1)), rng.randint(16, 64))
    for dtype in NOT_FLOAT:
        trusted.error(f"softmax_triton of a {dtype} tensor", (TypeError,),
                      lambda: softmax(torch.zeros(shape, dtype=dtype)))
    trusted.error("softmax_triton of a 0-d tensor", (ValueError,), lambda: softmax(torch.tensor(rng.random())))
    below = rng.choice((1, 2, 4, 8, 12, 15))
    for block_size in [below] + rng.sample([t for t in range(17, 300) if t & (t - 1)], 2):
        trusted.error(f"softmax_triton with block_size={block_size}", (ValueError,),
                      lambda: softmax(torch.zeros(shape), block_size))


def bad_matmuls(rng) -> dict:
    """Random arguments of matmul_triton outside its contract, by what is wrong: (a, b, kwargs, errors)."""
    m, k, n = (rng.randint(1, 20) for _ in range(3))
    other_k = rng.choice([x for x in range(1, 21) if x != k])
    z = torch.zeros
    return {
        "inner dims differ": (z(m, k), z(other_k, n), {}, (ValueError,)),
        "a is 1-D": (z(k), z(k, n), {}, (ValueError,)),
        "b is 3-D": (z(m, k), z(2, k, n), {}, (ValueError,)),
        "bias of length N + 1": (z(m, k), z(k, n), dict(bias=z(n + 1)), (ValueError,)),
        "bias of shape (1, N)": (z(m, k), z(k, n), dict(bias=z(1, n)), (ValueError,)),
        "bias of another dtype": (z(m, k), z(k, n), dict(bias=z(n, dtype=torch.float16)), (TypeError, ValueError)),
        "activation 'tanh'": (z(m, k), z(k, n), dict(activation="tanh"), (ValueError,)),
        "activation 'GELU'": (z(m, k), z(k, n), dict(activation="GELU"), (ValueError,)),
        "int64 operands": (z(m, k, dtype=torch.int64), z(k, n, dtype=torch.int64), {}, (TypeError,)),
        "float64 operands": (z(m, k, dtype=torch.float64), z(k, n, dtype=torch.float64), {}, (TypeError,)),
        "bf16 times fp32": (z(m, k, dtype=torch.bfloat16), z(k, n), {}, (TypeError,)),
    }


@pytest.mark.edge
@pytest.mark.points(2)
@pytest.mark.task("matmul.matmul_triton")
def test_matmul_rejects_random_bad_arguments(student, rng, trusted):
    """matmul_triton raises ValueError for shapes that do not multiply, a bias that is not (N,) and an unknown
    activation name; TypeError for non-float or mixed dtypes (a bias of another dtype: either), at random
    sizes."""
    matmul = student.module(MATMUL).matmul_triton
    for what, (a, b, options, errors) in bad_matmuls(rng).items():
        trusted.error(f"matmul_triton, {what}", errors, lambda: matmul(a, b, **options))
