"""Root conftest: select Triton's mode before anything imports Triton, then load the harness plugin."""

import kernels  # noqa: F401  (kernels/__init__ calls kernels.device.configure_triton())

pytest_plugins = ["autograder.harness.plugin", "pytester"]
