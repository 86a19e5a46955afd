"""Grading one submission: intake (a folder, a zip or a notebook read into the package layout), the
runner that stages it and drives the sandboxed worker, the client that starts runners, and the two
vocabularies every room speaks: the wire format between runner and worker, and the results model.

Nothing here is imported at package import: the worker side loads `wire` and `results` alone."""
