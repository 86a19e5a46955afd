"""Given tooling shared by the assignments, the solutions and the grader (never stubbed).

Importing this package selects Triton's mode (see kernels.device): on a machine without CUDA it sets
TRITON_INTERPRET=1 before anything can import Triton.
"""

from kernels.device import configure_triton

configure_triton()
