"""Public tests of assignment 2, flash_attention (handout: assignments/flash_attention/README.md)."""
