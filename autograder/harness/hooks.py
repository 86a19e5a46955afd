"""Hooks through which the grader takes over where student code runs (pytest's plugin mechanism)."""

import pluggy

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_llmsys_student(config):
    """Return the Student the tests talk to, or None to run student code in this process.

    The grader returns a student whose code runs in a sandboxed worker; the plugin then leaves
    sys.path to the grader, which holds the reference solutions there and never the submission.
    """
