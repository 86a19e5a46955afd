# Every target installs what it needs: a virtual environment in .venv, torch first (the pinned CPU
# wheel), then every other dependency at the exact version and file hash of requirements-instructor.lock
# (`make lock` writes it, and the student release's requirements.lock, from pyproject.toml). The install
# is skipped while the stamp for the current pyproject.toml and lock exists. Pass PYTHON=/path/to/python
# to use an environment you manage yourself (e.g. a GPU image with torch and triton preinstalled); then
# nothing is installed.

SHELL := /bin/bash
VENV ?= .venv
BOOTSTRAP ?= python3
TORCH_PIN ?= torch==2.13.0
# Linux without an NVIDIA GPU: PyPI's torch wheel for Linux brings several GB of CUDA libraries. Pass
# TORCH_INDEX=<PyTorch's CPU-only wheel index> (the index URL pytorch.org's "Get started" page gives
# for Linux, pip, CPU) to install the small CPU build of the same version instead. Empty by default:
# torch then comes from wherever pip is configured to look.
TORCH_INDEX ?=
LOCK := requirements-instructor.lock

ifeq ($(origin PYTHON), undefined)
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(LOCK) | cksum | cut -d' ' -f1)
else
STAMP :=
endif

PYTEST := $(PYTHON) -m pytest
SUBMISSION ?=
COHORT ?= build/cohort
GRADES ?= build/grades
# `make grade SUBMISSION=path` writes GRADED_ONE/<name>: never a batch's GRADES, whose files the gradebook owns.
# <name> is the grader's name of the submission: the folder's, or the .zip's without .zip (alice.smith stays whole).
GRADED_ONE ?= build/grade
GRADE_ONE_OUT = $(GRADED_ONE)/$(patsubst %.zip,%,$(notdir $(patsubst %/,%,$(SUBMISSION))))
# Not empty when that folder is GRADES, lies inside it or holds it: `make grade SUBMISSION=path` refuses then.
GRADE_ONE_CLASH = $(filter $(abspath $(GRADES)) $(abspath $(GRADES))/%,$(abspath $(GRADE_ONE_OUT)))$(filter \
  $(abspath $(GRADE_ONE_OUT)) $(abspath $(GRADE_ONE_OUT))/%,$(abspath $(GRADES)))
WORKERS ?= auto
# `make test A=gpu_kernels`: only that assignment's public tests (tests/<A>).
A ?=

.PHONY: help install sandbox-tools test test-public check-answers assignments check-sync roofline bench bench-kernels bench-grader grade

help:
	@echo "make test          install if needed, then run the whole suite (public tests, tooling, grader)"
	@echo "make test A=NAME   only the public tests of one assignment (e.g. A=gpu_kernels)"
	@echo "make test-public   the public tests of every assignment, against the solutions"
	@echo "make check-answers what the grader reads in each answers.md (A=NAME for one assignment): each part's number, or why none"
	@echo "make assignments   regenerate assignments/ (student stubs) from solutions/; make check-sync only checks"
	@echo "make roofline      write build/roofline.png (H100 and H200 rooflines with the lecture's ops)"
	@echo "make bench         attention benchmarks: table and build/bench_attention.png"
	@echo "make bench-kernels time gpu_kernels' GeLU, softmax and matmul against torch and the roofline, and the wave sweep (a GPU; BENCH_ARGS=--quick on a CPU): tables, build/bench_kernels/"
	@echo "make bench-grader  the grading loop per assignment: trusted grader (1 and 2 workers, and through Slurm) against nbgrader, where its time goes, student make test"
	@echo "make grade         grade a sample cohort, or one submission: make grade SUBMISSION=path"
	@echo "make load-check    the sample cohort graded idle and under load: every test result must be the same"
	@echo "make report        write the cohort report of GRADES (build/grades) again: GRADES/report/index.html"
	@echo "make bench-report  time the cohort report: the sample cohort and a synthetic one of 500 submissions"
	@echo "make report-screenshot  a screenshot of the report (build/report/screenshot.png; SCREENSHOT=autograder/report/screenshot.png for docs/term.md's), in headless chromium"
	@echo "make answers       build/answers/<assignment>.md: keys, model answers and hidden tests of each assignment past its release date"
	@echo "make release       the student release in dist/student/ (make nbgrader, make gradescope, make classroom: the other channels, in dist/)"
	@echo "make test-devcontainer  the release's development container set up from nothing in a clean Debian root (root, debootstrap, bwrap, the network; minutes)"
	@echo "make gpu-compile   every Triton kernel built for sm_80, sm_90 and sm_100 without a GPU (make test-gpu-grading: the hidden compile checks in full)"
	@echo "make check-design  gpu_kernels' hidden design checks (loads, tile order, the GeLU helper, program order) on the solutions at public sizes (IMPL=assignments: the stubs)"
	@echo "make gpu-validate  on a machine with CUDA: the GPU run in one command, build/gpu_validate.md (PYTHON=python3 on a GPU image: installs nothing)"
	@echo "make sandbox-debs  Debian's bubblewrap .deb and the seccomp binding's wheel into build/sandbox-tools/, for gpu-validate on a machine without a package index"
	@echo "make rehearse-gpu  the grader with its GPU branches taken, on this CPU: the reference of every assignment graded, a GPU-only mistake, each fault of the first GPU grading put back"
	@echo "make lock          resolve requirements-instructor.lock and requirements.lock again from pyproject.toml (UPGRADE=1: newest versions)"

install: $(STAMP)

# The stamp's name holds the checksum of pyproject.toml and the lock: a change to either names another stamp,
# so the rule has no prerequisite (a fresh clone's newer file times must not reinstall into an existing venv).
# The lock is installed by scripts/install_locked.py: uv (pinned in the lock, installed by pip first) with the
# indexes and wheel folders pip is configured with, where it can (it unpacks on every core: about 4 s instead of
# pip's 24 on 2 cores); pip where not, and a line says why. Both check every file against the lock's hashes, and
# refuse a dependency the lock lacks. Neither writes bytecode; compileall then writes all of it on every core at
# once, which pip does one file at a time (on 2 cores, about 23 s instead of 39). The sandboxed workers need it:
# they import from the read-only environment and could write none (so it is written there, whatever
# PYTHONPYCACHEPREFIX the caller has set). A file that does not compile is skipped.
$(VENV)/.installed-%:
	@test -x $(VENV)/bin/python || $(BOOTSTRAP) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-compile $(TORCH_PIN)$(if $(TORCH_INDEX), --index-url $(TORCH_INDEX))
	$(VENV)/bin/python scripts/install_locked.py $(LOCK)
	@env -u PYTHONPYCACHEPREFIX $(VENV)/bin/python -m compileall -q -j 0 "$$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true
	@rm -f $(VENV)/.installed-*
	@touch $@

# The lock files (docs/term.md, "Installing: the locked versions"): requirements-instructor.lock (this repository, the
# Gradescope grader) and requirements.lock (the student release), resolved by uv (an instructor extra) from
# pyproject.toml with TORCH_PIN, for Linux and macOS and every Python pyproject.toml allows. Versions locked
# now stay where pyproject.toml still allows them; UPGRADE=1 takes the newest. Needs the package index.
UPGRADE ?=
.PHONY: lock
lock: install
	$(PYTHON) -m autograder.package.lock --torch '$(TORCH_PIN)'$(if $(UPGRADE), --upgrade)

# The grader's sandbox uses bubblewrap. Install it where we can (root with apt); otherwise the grader
# says which protections are active without it.
sandbox-tools:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bubblewrap >/dev/null 2>&1; } || \
	    echo "note: could not install bubblewrap; the grader will run without it and say so"; \
	  else echo "note: bubblewrap (bwrap) is not installed; install Debian's 'bubblewrap' for the full sandbox"; fi; }

# The cohort report's tests open it in a headless browser: Debian's chromium and its chromedriver. Install
# them where we can (root with apt); otherwise those tests are skipped and say why.
.PHONY: browser-tools
browser-tools:
	@{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1; } || \
	    echo "note: could not install chromium; the cohort report's browser tests will be skipped"; \
	  else echo "note: chromium and chromedriver are not installed; install Debian's 'chromium' and 'chromium-driver' to run the cohort report's browser tests"; fi; }

# The whole suite runs its test files in TEST_WORKERS processes (pytest-xdist, where PYTHON has it; 1: one
# process, as `A=` always does), the longest files first (tests/conftest.py). Two on two cores: a third
# took as long (877 s against 881 s, fresh clones), with more load on every timing. Its many Python
# processes keep their bytecode in build/pycache, also where PYTHONDONTWRITEBYTECODE is set, and outside
# the source tree (the static checks refuse .pyc in solutions/); the environment's own bytecode is linked there
# once per install (scripts/seed_pycache.py), which the suite's first minutes would otherwise compile again, a
# dozen processes at once. Before them, the reference's builds of every compile check are made where
# build/build-cache lacks them (autograder/grading/buildcache.py; seconds, once per reference and compiler): the
# many gradings of the reference and its mistakes then compile only what differs (where they cannot be made, each
# grading compiles its own, as without them). No Hypothesis plugin of the environment's packages is loaded
# (HYPOTHESIS_NO_PLUGINS: trio's, a dependency of the browser tests' selenium, costs each pytest process 0.3 s),
# as the grader's runner loads none.
TEST_WORKERS ?= 2
XDIST = $(shell $(PYTHON) -c 'import xdist' 2>/dev/null && echo yes)
TEST_ENV := env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(CURDIR)/build/pycache HYPOTHESIS_NO_PLUGINS=1
test: install sandbox-tools browser-tools
	@test -z "$(A)" || test -d "assignments/$(A)" || { echo "make test A=$(A): no such assignment; A is one of:" $$(ls assignments); exit 2; }
	$(if $(A),,-$(TEST_ENV) $(PYTHON) scripts/seed_pycache.py)
	$(if $(A),,-$(TEST_ENV) $(PYTHON) -m autograder.grading.buildcache)
	$(if $(A),$(PYTEST) tests/$(A),$(TEST_ENV) $(PYTEST) --durations=20 $(if $(filter-out 1,$(TEST_WORKERS)),$(if $(XDIST),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)))

# What the grader will read in assignments/<A>/answers.md (every assignment without A): the number of each
# numeric part, or why there is none; no keys, so not whether it is right. Exit 1 where a part cannot be read.
check-answers: install
	@test -z "$(A)" || test -d "assignments/$(A)" || { echo "make check-answers A=$(A): no such assignment; A is one of:" $$(ls assignments); exit 2; }
	$(PYTHON) -m autograder.written.check $(A)

test-public: install
	$(PYTEST) tests/resource_accounting tests/flash_attention tests/gpu_kernels

# Every trivial strategy (return 0, 0.0, inf, None, True, False or the input; raise; call the function
# arguments as often as asked and return a made-up value) graded by the real grader; `make test` grades
# three of them.
.PHONY: test-trivial
test-trivial: install sandbox-tools
	LLMSYS_TRIVIAL=all $(PYTEST) tests/autograder/suites/test_trivial_submissions.py

assignments: install
	$(PYTHON) -m autograder.authoring.stubs solutions assignments

check-sync: install
	$(PYTHON) -m autograder.authoring.stubs solutions assignments --check

roofline: install
	$(PYTHON) -m kernels.roofline --out build/roofline.png

BENCH_ARGS ?=
bench: install
	$(PYTHON) -m kernels.bench_attention --out build/bench_attention.png $(BENCH_ARGS)

# gpu_kernels' three kernels timed against torch and the roofline (handout §7 "Timing your own kernels"): tables,
# build/bench_kernels/bench_kernels.csv and .png. Needs a CUDA GPU; BENCH_ARGS=--quick runs tiny sizes on a CPU.
bench-kernels: install
	$(PYTHON) -m kernels.bench_kernels --out build/bench_kernels $(BENCH_ARGS)

# The grading loop of every assignment, measured in one run: build/bench_grader.md (BENCH_GRADER_ARGS=--size N,
# --assignments A,B, --no-nbgrader, --no-slurm, --no-compiles, --gpu-seconds S), with the kernel compilations a GPU
# grading of the reference triggers, counted on this CPU (alone: python -m autograder.grading.compiles).
BENCH_GRADER_ARGS ?=
bench-grader: install sandbox-tools
	$(PYTHON) -m autograder.bench --out build/bench_grader.md $(BENCH_GRADER_ARGS)

# With no SUBMISSION: build the sample cohort from the reference (correct, stubs, mistakes, cheats),
# grade it into a gradebook and print it; its calls get SAMPLE_TIMEOUT seconds each, so that the
# endless-loop cheat costs a minute, not five (no honest call of the sample takes more than a few
# seconds). With SUBMISSION=path: grade that folder or .zip with the grader's default timeout.
SAMPLE_TIMEOUT ?= 15
grade: install sandbox-tools
ifeq ($(SUBMISSION),)
	$(PYTHON) -m autograder.cohort $(COHORT)
	$(PYTHON) -m autograder batch $(COHORT) --out $(GRADES) --workers $(WORKERS) --timeout $(SAMPLE_TIMEOUT); \
	  status=$$?; $(PYTHON) -m autograder similarity $(COHORT) --out $(GRADES) || status=1; test -f $(GRADES)/report/index.html && echo "cohort report: $(abspath $(GRADES))/report/index.html"; \
	  exit $$status
else
	@test -z "$(GRADE_ONE_CLASH)" || { echo "make grade: GRADED_ONE=$(GRADED_ONE) would put this submission's grade in" \
	  "$(GRADE_ONE_OUT), which overlaps the batch's GRADES=$(GRADES) (files the gradebook owns): give GRADED_ONE" \
	  "a folder of its own" >&2; exit 2; }
	$(PYTHON) -m autograder grade $(SUBMISSION) --out $(GRADE_ONE_OUT)
endif

# One submission, one grade: the sample cohort graded idle and again beside busy CPUs with more workers than
# cores; exits non-zero on any test whose result differs (docs/grading.md, "Budgets in CPU seconds"). About twice
# `make grade`'s time. LOAD_CHECK_ARGS=--member correct --member stubs grades fewer.
LOAD_CHECK_ARGS ?=
.PHONY: load-check
load-check: install sandbox-tools
	$(PYTHON) -m autograder.cohort.load_check --timeout $(SAMPLE_TIMEOUT) $(LOAD_CHECK_ARGS)

# The cohort report (docs/term.md, "The cohort report"): `batch` writes it; `make report` writes it again from the
# gradebook; `make report-screenshot` takes docs/term.md's screenshot of the sample cohort's report.
.PHONY: report report-screenshot bench-report
report: install
	$(PYTHON) -m autograder report $(GRADES)

# SCREENSHOT=autograder/report/screenshot.png replaces docs/term.md's picture (a tracked file: commit it).
SCREENSHOT ?= build/report/screenshot.png
report-screenshot: install browser-tools
	@mkdir -p $(dir $(SCREENSHOT))
	$(PYTHON) -m autograder.report.site_browser $(GRADES)/report/index.html $(SCREENSHOT)

# Time to write the report: the sample cohort of `make grade` (if graded) and a synthetic cohort of
# REPORT_BENCH_SIZE submissions (a gradebook filled directly, nothing graded).
REPORT_BENCH_SIZE ?= 500
bench-report: install
	$(PYTHON) -m autograder.report.site_bench --sample $(GRADES) --size $(REPORT_BENCH_SIZE) --work build/report_bench

# The answers students get after the course file's release date (docs/term.md, "Releasing the answers"): one
# Markdown file per released assignment, build/answers/ emptied first. ANSWERS_ARGS="--now 2027-02-01T00:00:00Z"
# previews the bundle of a later date; --course FILE reads another course file.
ANSWERS_ARGS ?=
.PHONY: answers
answers: install
	$(PYTHON) -m autograder.cohort.answers build/answers $(ANSWERS_ARGS)

# Packaging: every channel, generated from solutions/, tests/ and autograder/suites/ into dist/
# (docs/term.md, "Delivering through each channel"). Each target empties and rewrites its own folder.
DIST ?= dist

.PHONY: release nbgrader gradescope classroom

release: install
	$(PYTHON) -m autograder.package.release $(DIST)/student

# The student release's .devcontainer/setup.sh run from nothing in a clean Debian root (debootstrap, bubblewrap; no
# container engine), then its make test (scripts/devcontainer_check.py). Minutes, most of them torch's download:
# TORCH_INDEX=<PyTorch's CPU wheel index> keeps it small. `make test` checks the script's logic only.
.PHONY: test-devcontainer
test-devcontainer: install
	$(PYTHON) scripts/devcontainer_check.py --work build/devcontainer

nbgrader: install
	$(PYTHON) -m autograder.package.nbgrader $(DIST)/nbgrader

gradescope: install
	$(PYTHON) -m autograder.package.gradescope $(DIST)/gradescope$(if $(TORCH_INDEX), --torch-index $(TORCH_INDEX))

classroom: install
	$(PYTHON) -m autograder.package.classroom $(DIST)/classroom

# GPU readiness without a GPU (docs/gpus.md, "Building the kernels for a GPU without one"). gpu-compile: every Triton kernel
# of solutions/ and kernels/ built for sm_80, sm_90 and sm_100 in bf16 and fp16 (GPU_COMPILE_ARGS=--quick
# for the subset `make test` runs; --every-build for a row per build); exits non-zero on a failed build or
# a shared-memory overflow. test-gpu-grading: the hidden compile checks on the reference, an alternative
# and planted mistakes. gpu-validate: the one-command GPU run (needs CUDA), into build/gpu_validate.md; it installs
# nothing but the virtual environment (nothing with PYTHON=python3 on a GPU image: no package index needed) and runs
# the gradings under the bubblewrap that `make sandbox-debs` fetched into build/sandbox-tools/ where none is
# installed (GPU_VALIDATE_ARGS="--steps grade-gpu_kernels,reference" for some steps; --check-sandbox). rehearse-gpu:
# the grader's GPU branches taken on a CPU (LLMSYS_REHEARSE_GPU=1), every assignment graded (docs/gpus.md).
GPU_COMPILE_ARGS ?=
GPU_VALIDATE_ARGS ?=
.PHONY: gpu-compile test-gpu-grading gpu-validate sandbox-debs rehearse-gpu
gpu-compile: install
	TRITON_INTERPRET=0 $(PYTHON) -m kernels.crosscompile --json build/gpu_compile.json $(GPU_COMPILE_ARGS)

# gpu_kernels' design checks (kernels.check_design; the handout's §A.7), under Triton's interpreter on any machine:
# the hidden tests' observations on the solutions (or IMPL=assignments, IMPL=PATH) at public sizes.
IMPL ?=
.PHONY: check-design
check-design: install
	TRITON_INTERPRET=1 $(PYTHON) -m kernels.check_design $(if $(IMPL),--impl $(IMPL))

test-gpu-grading: install
	LLMSYS_GPU_GRADING_TESTS=1 $(PYTEST) tests/autograder/suites/test_gpu_compile_grading.py \
	  tests/autograder/suites/test_gpu_compile_grading_gpu_kernels.py tests/tooling/test_crosscompile.py

gpu-validate: install
	$(PYTHON) scripts/gpu_validate.py --out build/gpu_validate.md $(GPU_VALIDATE_ARGS)

sandbox-debs: install
	mkdir -p build/sandbox-tools && cd build/sandbox-tools && apt-get download bubblewrap
	$(PYTHON) -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
	  --dest build/sandbox-tools "pyseccomp==$$($(PYTHON) -c 'import importlib.metadata as m; print(m.version("pyseccomp"))')"

rehearse-gpu: install sandbox-tools
	LLMSYS_REHEARSE_ALL=1 $(PYTEST) tests/autograder/grading/test_gpu_rehearsal.py
