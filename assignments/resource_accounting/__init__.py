"""Assignment 1, resource accounting: count the bytes, FLOPs and seconds that training takes.

Modules: memory (bytes and number formats), einops_ops (named dimensions), flops (a FLOP counter,
the roofline, training compute), network (the lecture's deep network), training (saved activations,
gradient accumulation, checkpointing, autocast). The handout is README.md beside this file.
"""
