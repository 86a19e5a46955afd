"""The packagers: every channel a course delivers and grades through, generated from one source.

    release     dist/student/      the student release (stubs, public tests, harness, Makefile, README)
    nbgrader    dist/nbgrader/     an nbgrader course: a source notebook per assignment, then its release
    gradescope  dist/gradescope/   one autograder zip per assignment (setup.sh, run_autograder)
    classroom   dist/classroom/    a GitHub Classroom template repository with its grading workflow

and the lock files they install from (lock: requirements.lock, requirements-instructor.lock; `make lock`).

Two small modules of this package also ship to students, with the channels that need them:
notebook_tests (the notebook's test cells) and classroom_step (the Classroom workflow's steps).
So this file imports nothing.
"""
