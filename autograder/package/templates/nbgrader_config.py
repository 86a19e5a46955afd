"""nbgrader's configuration of the course (written by `make nbgrader`; docs/term.md: "Delivering through each channel")."""

c = get_config()  # noqa: F821  (nbgrader defines get_config when it loads this file)

c.CourseDirectory.course_id = "llm-systems"
# Beside each notebook are the public tests and the test harness its test cells run; caches stay out.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".hypothesis",
                            ".pytest_cache"]
# A test cell runs a whole test file, and its hidden suite when graded: nbgrader's 30 s is too short.
c.Execute.timeout = 600
# A kernel started while the machine grades others (a class autograded at once) may take more than nbgrader's 60 s
# to answer; the student's notebook must not fail for that.
c.Execute.startup_timeout = 300
# `nbgrader generate_feedback` (after nbgrader's own autograde) must not show the hidden tests: their
# code is cut from the test cells, and the cells' outputs (which name the hidden tests run) cleared.
# The trusted grader writes its own feedback to feedback/ (docs/term.md: nbgrader, step 5).
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbgrader.preprocessors.ClearOutput",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
