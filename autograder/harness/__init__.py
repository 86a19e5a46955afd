"""The test harness: the seam between tests and student code, points, and the implementation switch.

It ships in the student release with the public tests; the grader plugs into it (see hooks.py).
"""
