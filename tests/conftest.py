"""The repository's suite only: the student release and the hosted packages ship no tests/conftest.py.

Under pytest-xdist (`make test`: `-n 2 --dist loadfile --no-loadscope-reorder`) each test file goes to one
worker whole, in collection order. A file of a few long tests sent last keeps one worker busy alone while
the other has finished, so the files that take longest (measured with `--durations`, idle, 2 cores) go
first, longest first; the rest keep pytest's order. Only the order changes, never what runs.

The files of a folder in ONE_WORKER go to one worker together: their session fixture (tests/autograder/package's
`packaged`: every channel built, and the end-to-end runs started in the background) would otherwise be made,
and its runs run, once on each worker that gets one of the files.
"""

import pytest

ONE_WORKER = ("tests/autograder/package/",)

SLOWEST_FIRST = (
    "tests/autograder/cohort/test_slurm.py",
    "tests/autograder/suites/test_suites_flash_attention.py",
    "tests/autograder/grading/test_grading.py",
    "tests/autograder/suites/test_suites_gpu_kernels.py",
    "tests/autograder/package/test_nbgrader.py",
    "tests/autograder/sandbox/test_fail_closed.py",
    "tests/autograder/harness/test_harness.py",
    "tests/autograder/suites/test_suites_resource_accounting.py",
    "tests/autograder/package/test_student_loop.py",
    "tests/autograder/sandbox/test_cputime.py",
    "tests/tooling/test_crosscompile.py",
    "tests/autograder/suites/test_gpu_compile_grading_gpu_kernels.py",
    "tests/autograder/suites/test_trivial_submissions.py",
    "tests/autograder/grading/test_attacks_trusted.py",
    "tests/autograder/grading/test_ahead.py",
    "tests/autograder/sandbox/test_sandbox.py",
    "tests/autograder/package/test_reproducible.py",
    "tests/autograder/suites/test_suites_gpu_kernels_cost.py",
    "tests/autograder/sandbox/test_worker_start.py",
    "tests/autograder/grading/test_stages.py",
    "tests/autograder/grading/test_gpu_rehearsal.py",
    "tests/autograder/cohort/test_similarity.py",
)


def pytest_collection_modifyitems(session, config, items):
    if not hasattr(config, "workerinput"):  # only an xdist worker's collection, which the controller schedules
        return
    rank = {path: index for index, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))  # stable: files stay whole


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # pytest-xdist's hook (absent without it), before its own
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FolderScheduling(LoadFileScheduling):
        """--dist loadfile, with the files of each folder of ONE_WORKER as one unit."""

        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return next((folder for folder in ONE_WORKER if path.startswith(folder)), path)

    return FolderScheduling(config, log)


@pytest.fixture(scope="session")
def warm_grade():
    """grade(submission, assignment=None, select=None, seed=None): a GradeReport from one grading server
    of this test process, started at its first call and ended with the session (seed: the randomised tests'
    seed, else the submission's own).

    It is the path a cohort takes (`batch`: autograder.grading.client.GradingServer): the server imports torch,
    the reference and the test modules and starts its zygote once, then grades each submission in a child forked
    for it, with sandboxed workers of its own. A test that asks what the real grader gives a submission uses it
    and does not pay a grader's start (about 7 CPU s of a single `grade`) for each answer. The tests of the single
    grading itself (its timings, its seed, the files it writes, its refusals) call autograder.grading.client.grade.
    As a single grading, a report the machine was too busy to finish is graded once more."""
    from autograder.grading.client import OVERLOAD_ATTEMPTS, GradingServer  # here: not in a public test's run

    server = GradingServer()  # its process starts at the first grading

    def grade(submission, assignment: str | None = None, select: str | None = None, seed: int | None = None):
        for _ in range(OVERLOAD_ATTEMPTS):
            report = server.grade(submission, assignment=assignment, select=select, seed=seed)
            if not report.overloaded:
                break
        return report

    yield grade
    server.close()
