# The student release's Makefile. Every target installs what it needs: a virtual environment in .venv,
# torch first (the pinned wheel), then every other dependency at the exact version and file hash of
# requirements.lock (the course's versions, the same all term). The install is skipped while the stamp
# for the current pyproject.toml and requirements.lock exists. Pass PYTHON=/path/to/python to use an
# environment you manage yourself (e.g. a GPU image with torch and triton preinstalled); then nothing
# is installed.

SHELL := /bin/bash
VENV ?= .venv
BOOTSTRAP ?= python3
TORCH_PIN ?= torch==2.13.0
# Linux without an NVIDIA GPU: PyPI's torch wheel for Linux brings several GB of CUDA libraries. Pass
# TORCH_INDEX=<PyTorch's CPU-only wheel index> (the index URL pytorch.org's "Get started" page gives
# for Linux, pip, CPU) to install the small CPU build of the same version instead. Empty by default:
# torch then comes from wherever pip is configured to look.
TORCH_INDEX ?=
LOCK := requirements.lock

ifeq ($(origin PYTHON), undefined)
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(LOCK) | cksum | cut -d' ' -f1)
else
STAMP :=
endif

PYTEST := $(PYTHON) -m pytest
PYTEST_ARGS ?=
T ?=
A ?=
BENCH_ARGS ?=

.PHONY: help install test test-public check-answers gpu-compile check-design roofline bench bench-kernels

help:
	@echo "make test          install if needed, then run the public tests against your code, with the points table"
	@echo "make install       only install: .venv with the course's locked versions (make test does it the first time)"
	@echo "make test T=TASK   only the tests of one task (e.g. T=flops.FlopCounter) or one module's (T=flops)"
	@echo "make test A=NAME   only the tests of one assignment (e.g. A=gpu_kernels); combines with T="
	@echo "make test-public   the same (every test of this release is public)"
	@echo "make check-answers what the grader will read in your answers.md (A=NAME for one assignment): each part's number, or why none"
	@echo "make gpu-compile   build your Triton kernels for an H100 (sm_90) without a GPU, as the grader does; A=gpu_kernels for one assignment"
	@echo "make check-design  the hidden design checks of gpu_kernels (loads per element, tile order, the GeLU helper, program order) on your code"
	@echo "make roofline      write build/roofline.png (H100 and H200 rooflines with the lecture's ops)"
	@echo "make bench         attention benchmarks of your code: table and build/bench_attention.png"
	@echo "make bench-kernels time your gpu_kernels GeLU, softmax and matmul against torch and the roofline, and the wave sweep (a GPU; BENCH_ARGS=--quick on a CPU): tables, build/bench_kernels/"

install: $(STAMP)

# The stamp's name holds the checksum of pyproject.toml and the lock, so the rule needs no prerequisite:
# file times never reinstall into a venv that already has this lock's dependencies. pip checks every file
# it installs against the lock's hashes. pip runs quiet, what it says goes to INSTALL_LOG, and the first
# run shows one line for the whole install; a failure says so and shows the log's last lines.
INSTALL_LOG := $(VENV)/install.log
PIP_INSTALL = $(VENV)/bin/python -m pip install --quiet --disable-pip-version-check
PIP_FAILED = { echo "make: installing into $(VENV) failed; the end of pip's log, $(INSTALL_LOG):"; \
  tail -n 20 $(INSTALL_LOG); exit 1; }
$(VENV)/.installed-%:
	@test -x $(VENV)/bin/python || $(BOOTSTRAP) -m venv $(VENV)
	@echo "Installing torch and the course's locked packages into $(VENV), the first time only (a few minutes; pip's log: $(INSTALL_LOG))"
	@$(PIP_INSTALL) $(TORCH_PIN)$(if $(TORCH_INDEX), --index-url $(TORCH_INDEX)) >>$(INSTALL_LOG) 2>&1 || $(PIP_FAILED)
	@$(PIP_INSTALL) --require-hashes -r $(LOCK) >>$(INSTALL_LOG) 2>&1 || $(PIP_FAILED)
	@rm -f $(VENV)/.installed-*
	@touch $@

test: install
	@test -z "$(A)" || test -d "assignments/$(A)" || { echo "make test A=$(A): no such assignment; A is one of:" $$(ls assignments); exit 2; }
	$(PYTEST) $(if $(A),tests/$(A)) $(if $(T),--task $(T)) $(PYTEST_ARGS)

test-public: test

# What the grader will read in assignments/<A>/answers.md (every assignment without A): the number of each
# numeric part, or why there is none; it has no keys, so it says what is read, not whether it is right.
check-answers: install
	@test -z "$(A)" || test -d "assignments/$(A)" || { echo "make check-answers A=$(A): no such assignment; A is one of:" $$(ls assignments); exit 2; }
	$(PYTHON) -m autograder.written.check $(A)

# Your kernels built for the course GPU with Triton's own compiler (Linux; no GPU needed), as the grader's
# compile checks build them: each must compile, fit the GPU's shared memory and put its dots on the tensor
# cores. Kernels still stubs are named, not built.
gpu-compile: install
	$(PYTHON) -m kernels.crosscompile --impl assignments --quick $(if $(A),--assignment $(A))

# gpu_kernels' hidden design checks on your code at public sizes (its handout, §A.7), under Triton's interpreter
# on any machine: what each program loads, the grouped tile order, the epilogue's GeLU helper, program order.
check-design: install
	TRITON_INTERPRET=1 $(PYTHON) -m kernels.check_design --impl assignments

roofline: install
	$(PYTHON) -m kernels.roofline --out build/roofline.png

bench: install
	$(PYTHON) -m kernels.bench_attention --impl assignments --out build/bench_attention.png $(BENCH_ARGS)

# Your gpu_kernels kernels timed against torch and the roofline (its handout, §7 "Timing your own kernels"):
# tables, build/bench_kernels/bench_kernels.csv and .png. Needs a CUDA GPU; BENCH_ARGS=--quick runs tiny sizes
# on a CPU, only to check that it runs.
bench-kernels: install
	$(PYTHON) -m kernels.bench_kernels --impl assignments --out build/bench_kernels $(BENCH_ARGS)
