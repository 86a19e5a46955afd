"""The reference's gpu_kernels cost functions (solutions/gpu_kernels/cost.py), loaded from their file.

Loaded by path, not imported as `gpu_kernels.cost`, so that the tests that check figures against them do not
depend on which implementation tree is active in the process.
"""

import importlib.util
from pathlib import Path

PATH = Path(__file__).resolve().parents[2] / "solutions" / "gpu_kernels" / "cost.py"


def load():
    spec = importlib.util.spec_from_file_location("reference_gpu_kernels_cost", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
