"""The autograder: authoring (stubs), the test harness, the sandboxed runner, reports and packagers."""
