"""Public tests of assignment 3, flash_attention (handout: assignments/flash_attention/README.md)."""
