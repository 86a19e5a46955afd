"""Static rules of flash_attention, as the handout's "Forbidden in ..." lines (§3, §5, §8) state them; the
handout's appendix (§A.1, §A.2) is generated from them.

The whole-row softmax is forbidden in every spelling (torch.softmax, F.softmax, x.softmax(...),
torch.logsumexp, ...), not only the two the handout names: any of them needs the whole score row.
"""

from autograder.static.checks import OUT_OF_SIGHT, PATCHING_RULES, Rule
from autograder.static.triton_rules import TritonRules

RULES: list[Rule] = [
    Rule(
        name="library attention",
        modules=("reference", "flash_pytorch", "flash_triton"),
        forbidden=("scaled_dot_product_attention", "flash_attn"),
        reason="the attention must be your own code, not PyTorch's or flash-attn's; see the handout §3, §5, §8",
    ),
    Rule(
        name="reference attention",
        modules=("flash_pytorch", "flash_triton"),
        forbidden=("flash_attention.reference.attention",),
        reason="a FlashAttention may not fall back on the naive reference attention; see the handout §5, §8",
    ),
    Rule(
        name="online softmax",
        modules=("flash_pytorch",),
        forbidden=("softmax", "log_softmax", "logsumexp", "torch.nn.Softmax", "torch.nn.LogSoftmax"),
        reason="the online softmax is the point: a softmax over whole rows needs the whole score row; "
               "see the handout §5",
    ),
    Rule(
        name="measured in sight",
        modules=("flash_pytorch",),
        forbidden=OUT_OF_SIGHT,
        reason="flash_pytorch runs in the caller's thread, where the tests measure its memory and FLOPs: no "
               "threads, no processes, no leaving the dispatch modes; see the handout §5",
    ),
    Rule(
        name="triton kernels",
        modules=("flash_triton",),
        forbidden=("flash_attention.flash_pytorch", "make_block_ptr", "triton.language.advance"),
        reason="the computation must be Triton kernels with plain pointer arithmetic (no flash_pytorch "
               "functions, no block pointers: the locked Triton 3.7.1 has them, but they raise in Triton 3.9); "
               "see the handout §8",
    ),
    Rule(
        name="uses triton",
        modules=("flash_triton",),
        required=("triton.jit",),
        reason="flash_triton must compute with Triton kernels (@triton.jit); see the handout §8",
    ),
] + PATCHING_RULES

# flash_triton's host code and kernels (autograder.static.triton_rules): the host allocates, reshapes and launches;
# the attention's arithmetic is in @triton.jit functions. The entry points' tensor parameters:
TRITON_RULES: list[TritonRules] = [
    TritonRules(
        name="triton computes",
        modules=("flash_triton",),
        tensors={
            "flash_forward_triton": ("q", "k", "v"),
            "flash_backward_triton": ("q", "k", "v", "o", "lse", "do"),
            "FlashAttentionTriton.forward": ("ctx", "q", "k", "v"),
            "FlashAttentionTriton.backward": ("ctx", "do"),
        },
        section="§A.1",
    ),
]
