"""Static rules of gpu_kernels' Triton tasks, as the handout's §9 Forbidden APIs states them.

No kernel module may call the library functions the kernels reimplement, under any alias: GeLU
(`F.gelu`, `torch.nn.GELU`, `torch.erf`, `torch.tanh`), the softmax (`torch.softmax`, `F.softmax`,
`log_softmax`, `logsumexp`, `torch.nn.Softmax`), the matmul (`torch.matmul`, `__matmul__`, `mm`,
`bmm`, `addmm`, `F.linear`, `einsum`, `tensordot`, `torch.linalg`, `torch.nn.Linear`). Names are
dotted, so that the modules' own names (softmax.py, matmul.py) are no use. Tensor methods
(`x.softmax(-1)`, `a @ b`, `a.matmul(b)`) and anything else torch computes are caught by the
TRITON_RULES (autograder/triton_rules.py): host code allocates, reshapes and launches, and every
arithmetic operation is in @triton.jit functions.
"""

from autograder.checks import Rule
from autograder.triton_rules import TritonRules

KERNELS = ("elementwise", "softmax", "matmul")

RULES: list[Rule] = [
    Rule(
        name="library gelu",
        modules=KERNELS,
        forbidden=("torch.nn.functional.gelu", "torch._C._nn.gelu", "torch.ops.aten.gelu", "torch.nn.GELU", "torch.erf", "torch.special.erf", "torch.tanh", "torch.nn.Tanh"),
        reason="GeLU must be your Triton kernel, not torch's; see the handout §2 and §9",
    ),
    Rule(
        name="library softmax",
        modules=KERNELS,
        forbidden=("torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax", "torch._softmax",
                   "torch.log_softmax", "torch.nn.functional.log_softmax", "torch.special.log_softmax",
                   "torch.logsumexp", "torch.special.logsumexp", "torch.nn.Softmax", "torch.nn.LogSoftmax",
                   "torch.ops.aten._softmax", "torch.ops.aten.softmax", "torch.Tensor.softmax"),
        reason="the softmax must be your Triton kernel, not torch's; see the handout §3 and §9",
    ),
    Rule(
        name="library matmul",
        modules=KERNELS,
        forbidden=("torch.matmul", "torch.Tensor.matmul", "torch.Tensor.__matmul__", "__matmul__", "__rmatmul__",
                   "torch.mm", "torch.bmm", "torch.addmm", "torch.baddbmm", "torch.addmv", "torch.mv", "torch.dot",
                   "torch.linear", "torch.nn.functional.linear", "torch._C._nn.linear", "torch.nn.Linear",
                   "torch.einsum", "torch.tensordot", "torch.chain_matmul", "torch.linalg", "torch.inner",
                   "torch.outer", "torch.ops.aten.mm", "torch.ops.aten.addmm", "torch.ops.aten.matmul",
                   "torch._addmm_activation"),
        reason="the matmul must be your Triton kernel, not torch's or cuBLAS's; see the handout §4 and §9",
    ),
    Rule(
        name="triton kernels",
        modules=KERNELS,
        forbidden=("make_block_ptr", "triton.language.advance", "make_tensor_descriptor"),
        reason="plain pointer arithmetic with masks (block pointers are gone in Triton 3.9); see the handout §1",
    ),
    Rule(
        name="uses triton",
        modules=KERNELS,
        required=("triton.jit",),
        reason="each kernel module must compute with Triton kernels (@triton.jit); see the handout §1",
    ),
]

# Host code allocates, reshapes and launches; the arithmetic is in @triton.jit functions (handout §1).
# Each entry point's tensor parameters:
TRITON_RULES: list[TritonRules] = [
    TritonRules(name="triton computes gelu", modules=("elementwise",), tensors={"gelu_triton": ("x",)},
                section="§2"),
    TritonRules(name="triton computes softmax", modules=("softmax",), tensors={"softmax_triton": ("x",)},
                section="§3"),
    TritonRules(name="triton computes matmul", modules=("matmul",),
                tensors={"matmul_triton": ("a", "b", "bias")}, section="§4"),
]
