"""Public tests of assignment 2, gpu_kernels (handout: assignments/gpu_kernels/README.md)."""
