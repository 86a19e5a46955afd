"""Given tooling shared by the assignments, the solutions and the grader (never stubbed).

Importing this package selects Triton's mode (see kernels.device): on a machine without CUDA it sets
TRITON_INTERPRET=1 before anything can import Triton; and, where Triton is interpreted, it holds every
kernel launched to the GPU compiler's rule on globals (kernels.kernel_globals), and lets a kernel's calls of
@triton.jit functions skip Triton's patching of what its launch has patched (kernels.interpreter_calls).
"""

from kernels.device import configure_triton
from kernels.kernel_globals import install_on_import

if configure_triton():
    install_on_import()
