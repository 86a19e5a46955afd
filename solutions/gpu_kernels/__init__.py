"""Assignment 3: the GPU lecture's practical, Triton kernels, their costs and their measurement (handout: README.md)."""
