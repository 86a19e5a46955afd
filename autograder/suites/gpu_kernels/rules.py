"""Static rules of gpu_kernels' Triton tasks; the handout's appendix (§A.1, §A.2) is generated from them.

No kernel module may call the library functions the kernels reimplement, under any alias: GeLU
(`F.gelu`, `torch.nn.GELU`, `torch.erf`, `torch.tanh`), the softmax (`torch.softmax`, `F.softmax`,
`log_softmax`, `logsumexp`, `torch.nn.Softmax`), the matmul (`torch.matmul`, `__matmul__`, `mm`,
`bmm`, `addmm`, `F.linear`, `einsum`, `tensordot`, `torch.linalg`, `torch.nn.Linear`). Names are
dotted, so that the modules' own names (softmax.py, matmul.py) are no use. Tensor methods
(`x.softmax(-1)`, `a @ b`, `a.matmul(b)`) and anything else torch computes are caught by the
TRITON_RULES (autograder/static/triton_rules.py): host code allocates, reshapes and launches, and every
arithmetic operation is in @triton.jit functions.
"""

from autograder.static.checks import PATCHING_RULES, Rule
from autograder.static.triton_rules import TritonRules

KERNELS = ("elementwise", "softmax", "matmul")

# The library functions the kernels reimplement (§A.2), by dotted name.
LIBRARY_GELU = ("torch.nn.functional.gelu", "torch._C._nn.gelu", "torch.ops.aten.gelu", "torch.nn.GELU", "torch.erf",
                "torch.special.erf", "torch.tanh", "torch.nn.Tanh")
LIBRARY_SOFTMAX = ("torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax", "torch._softmax",
                   "torch.log_softmax", "torch.nn.functional.log_softmax", "torch.special.log_softmax",
                   "torch.logsumexp", "torch.special.logsumexp", "torch.nn.Softmax", "torch.nn.LogSoftmax",
                   "torch.ops.aten._softmax", "torch.ops.aten.softmax", "torch.Tensor.softmax")
LIBRARY_MATMUL = ("torch.matmul", "torch.Tensor.matmul", "torch.Tensor.__matmul__", "__matmul__", "__rmatmul__",
                  "torch.mm", "torch.bmm", "torch.addmm", "torch.baddbmm", "torch.addmv", "torch.mv", "torch.dot",
                  "torch.linear", "torch.nn.functional.linear", "torch._C._nn.linear", "torch.nn.Linear",
                  "torch.einsum", "torch.tensordot", "torch.chain_matmul", "torch.linalg", "torch.inner",
                  "torch.outer", "torch.ops.aten.mm", "torch.ops.aten.addmm", "torch.ops.aten.matmul",
                  "torch._addmm_activation")

RULES: list[Rule] = [
    Rule(
        name=f"library functions in {module}.py",
        modules=(module,),
        forbidden=LIBRARY_GELU + LIBRARY_SOFTMAX + LIBRARY_MATMUL,
        reason="the kernels compute GeLU, the softmax and the matmul themselves, not torch (nor cuBLAS); see the "
               "handout §A.2",
    )
    for module in KERNELS
] + [
    Rule(
        name="triton kernels",
        modules=KERNELS,
        forbidden=("make_block_ptr", "triton.language.advance", "make_tensor_descriptor"),
        reason="plain pointer arithmetic with masks, no block pointers (the locked Triton 3.7.1 has them, but they "
               "raise in Triton 3.9); see the handout §A.2",
    ),
    Rule(
        name="uses triton",
        modules=KERNELS,
        required=("triton.jit",),
        reason="each kernel module must compute with Triton kernels (@triton.jit); see the handout §A.2",
    ),
    Rule(
        name="benchmark by hand",
        modules=("measure.benchmark",),
        forbidden=("triton.testing.do_bench", "do_bench", "kernels.bench", "torch.utils.benchmark"),
        reason="benchmark must warm up, synchronise and take the median itself; see the handout §A.2",
    ),
] + PATCHING_RULES

# Host code allocates, reshapes and launches; the arithmetic is in @triton.jit functions (handout §A.1).
# Each entry point's tensor parameters:
TRITON_RULES: list[TritonRules] = [
    TritonRules(name="triton computes gelu", modules=("elementwise",), tensors={"gelu_triton": ("x",)},
                section="§A.1"),
    TritonRules(name="triton computes softmax", modules=("softmax",), tensors={"softmax_triton": ("x",)},
                section="§A.1"),
    TritonRules(name="triton computes matmul", modules=("matmul",),
                tensors={"matmul_triton": ("a", "b", "bias")}, section="§A.1"),
]
