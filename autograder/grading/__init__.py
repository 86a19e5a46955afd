"""Grading one submission: intake (a folder, a zip or a notebook read into the package layout), the
runner that stages it and drives the sandboxed worker, the client that starts runners, and stages.
The words they speak (the results model, the wire format) live on the ground floor, autograder.model."""
