"""Public tests of assignment 2, flash_attention (handout: solutions/flash_attention/README.md)."""
