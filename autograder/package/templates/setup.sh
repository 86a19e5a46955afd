#!/usr/bin/env bash
# Gradescope runs this once, as root on its Ubuntu image, to build the autograder: Debian's bubblewrap
# for the sandbox the student's code runs in, then a virtual environment beside this script with torch
# (installed first, pinned, as everywhere in the course) and the grader's dependencies at the exact versions
# and file hashes of requirements-instructor.lock (those the course's own grader runs).
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq bubblewrap python3-venv
PYTHON=python3
# The grader needs Python 3.11 or newer; Ubuntu 22.04's python3 is 3.10 (its python3.11 package is
# used), and Ubuntu 20.04 has no Python 3.11 at all: choose Gradescope's Ubuntu 22.04 image or newer.
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  if ! apt-get install -y -qq python3.11 python3.11-venv; then
    echo "setup.sh: no Python 3.11 on this image; choose Gradescope's Ubuntu 22.04 (or newer) base image" >&2
    exit 1
  fi
  PYTHON=python3.11
fi
"$PYTHON" -m venv .venv
# The wheel index torch comes from (`make gradescope TORCH_INDEX=...` writes it here): Gradescope's machines
# have no NVIDIA GPU, and PyTorch's CPU-only index saves the several GB of CUDA libraries. Empty: pip's default.
TORCH_INDEX="@TORCH_INDEX@"
.venv/bin/python -m pip install --quiet --disable-pip-version-check torch==2.13.0 ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
.venv/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements-instructor.lock
