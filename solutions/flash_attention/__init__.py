"""Assignment 2: FlashAttention-2 in PyTorch and Triton, forward and backward (handout: README.md)."""
