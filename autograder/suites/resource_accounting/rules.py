"""Static rules of resource_accounting, as the handout's "Forbidden APIs" table states them."""

from autograder.static.checks import EVERY_MODULE, OUT_OF_SIGHT, PATCHING_RULES, Rule

RULES: list[Rule] = [
    Rule(
        name="flop counter",
        modules=("flops",),
        forbidden=("torch.utils.flop_counter", "FlopCounterMode"),
        reason="FlopCounter must count FLOPs itself; see the handout, Forbidden APIs",
    ),
    Rule(
        name="einops scores",
        modules=("einops_ops.attention_scores",),
        required=("einops.einsum",),
        reason="attention_scores must be written with einops.einsum; see the handout, Forbidden APIs",
    ),
    Rule(
        name="einops heads",
        modules=("einops_ops.split_heads", "einops_ops.merge_heads"),
        required=("einops.rearrange",),
        reason="split_heads and merge_heads must be written with einops.rearrange; see the handout, "
               "Forbidden APIs",
    ),
    Rule(
        name="measured in sight",
        modules=(EVERY_MODULE,),
        forbidden=OUT_OF_SIGHT,
        reason="your functions run in the caller's thread, where the tests measure what they compute, save and "
               "hold: no threads, no processes, no leaving the dispatch modes; see the handout §9",
    ),
] + PATCHING_RULES
