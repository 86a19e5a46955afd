"""The last module tests.pytest_run's forkserver imports, after its preloads: what is warm now (torch, Triton,
pytest, Hypothesis) is frozen out of the garbage collector's reach, so that each forked run's collections walk
only what that run made. pytest collects twice at the end of every run, and Hypothesis once at its first test:
over torch's objects, a third of a second of each run.
"""

import gc

gc.collect()
gc.freeze()
