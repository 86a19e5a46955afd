"""The vocabulary every room of the grader speaks, on the ground floor: the results model (what a grade
is: TestResult, GradeReport), the wire format between the trusted runner and the sandboxed worker (plain
data only), and the solution markers' syntax. It imports nothing of autograder/ above it.

Nothing here is imported at package import: the worker side loads `wire` alone, the student's release
`results`, `wire` and `markers`."""
