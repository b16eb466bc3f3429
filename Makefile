# The lab's commands. Each installs what it needs on first use (tools/setup.sh).
#   make grade                 grade exercises/ on this machine (NumPy + Triton interpreter)
#   make check EX=<exercise>   one exercise [LAYERS=cpu,adversarial,interp]; make check lists them
#   make grade SUBMISSION=dir  grade another folder (make check too); SEED=n repeats the inputs
#   make grade ARGS="..."      more grader flags (python -m grader --help; make grade-gpu too)
#   make grade-gpu             every layer, GPU correctness and speed included
#   make grade-gpu TARGET=gb10 also check each Triton kernel's shared memory against the Spark
#   make gpuinfo | bench       the GPU's memory ladder and limits; benchmark plots and Measure table
#   make cost                  seconds per exercise and layer of the last grade, a class's cost
#   make test | stubs          the repo's own tests; exercises/ built from solutions/ (staff)
#   make release | gradescope  student release, Gradescope zip (course staff)
#   make gradescope-jammy      the zip graded as on Gradescope, in an Ubuntu 22.04 root (root, ~20 min)
SUBMISSION ?= $(if $(IMPL),$(IMPL),exercises)
REPORTS ?= reports
PY = $(shell cat .python)
# -I: nothing in the current folder or the submission can shadow the grader's imports
# TARGET=gb10: kernels compiled for the DGX Spark too, its tiles in the perf layer (docs/SPARK.md)
# SEED=n: every check's inputs from this seed (a failure message gives it); ARGS: more flags
RUN_GRADER = $(PY) -I grader/__main__.py --submission $(SUBMISSION) $(if $(TARGET),--target $(TARGET),) \
	$(if $(SEED),--seed $(SEED),) $(ARGS)
GRADER = $(RUN_GRADER) --json $(REPORTS)/grade.json --markdown $(REPORTS)/grade.md
CPU_LAYERS = cpu,adversarial,interp

.PHONY: setup grade grade-gpu check cost gpuinfo test stubs bench release gradescope gradescope-jammy clean help
help:
	@sed -n '2,12p' Makefile | sed 's/^# //'

.python: requirements.txt tools/setup.sh
	@sh tools/setup.sh

# exercises/*.py are built from the markers in solutions/*.py (tools/stubs.py), not committed; in
# the student release they are the student's own files, with no solutions/ to build them from
STUB_FILES = $(patsubst solutions/%,exercises/%,$(wildcard solutions/*.py))
ifneq ($(STUB_FILES),)
$(STUB_FILES) &: $(wildcard solutions/*.py) tools/stubs.py .python
	@$(PY) -m tools.stubs
	@touch $(STUB_FILES)
endif

setup:
	@rm -f .python
	@sh tools/setup.sh

grade: .python $(STUB_FILES)
	@$(GRADER) --layers $(CPU_LAYERS)

# the exercises a student can check: their files in exercises/ (made from solutions/ here)
EXERCISE_NAMES = $(sort $(basename $(notdir $(wildcard exercises/*.py solutions/*.py))))
check: .python $(STUB_FILES)
	@test -n "$(EX)" || { echo "usage: make check EX=<exercise> [LAYERS=$(CPU_LAYERS)]"; \
	  echo "exercises: $(EXERCISE_NAMES)"; exit 2; }
	@$(RUN_GRADER) --json $(REPORTS)/check_$(EX).json --markdown $(REPORTS)/check_$(EX).md \
	  --exercises $(EX) $(if $(LAYERS),--layers $(LAYERS),)

grade-gpu: .python $(STUB_FILES)
	@nvidia-smi -L >/dev/null 2>&1 || $(PY) -I -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null || \
	  echo "*** No CUDA GPU found on this machine: the gpu and perf layers will be reported as not run. ***"
	@$(GRADER)

# seconds per exercise and layer of a report (default: the last make grade-gpu's), a GB10
# estimate from the ceilings measured in it, a class's cost and a Slurm array's size (tools/cost.py)
cost: .python
	@$(PY) -m tools.cost $(if $(REPORT),$(REPORT),$(REPORTS)/grade.json) $(if $(STUBS),--stubs $(STUBS),)

INSTRUCTOR_ONLY = @test -d solutions || { echo "make $@ is for course staff: it needs solutions/ and tests/, which the student release leaves out"; exit 2; }

# one pytest process per core, at most four, where pytest-xdist is installed (tests/conftest.py)
TEST_JOBS ?= $(shell $(PY) -c "import os, xdist; print(min(4, len(os.sched_getaffinity(0))))" 2>/dev/null)
# tests/test_pages.py opens the report pages in Chromium: installed here when missing and run
# as root (Debian's package, best effort, quietly); the test skips, saying why, without it
test: .python $(STUB_FILES)
	$(INSTRUCTOR_ONLY)
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 || true
	@$(PY) -m pytest tests $(if $(TEST_JOBS),-n $(TEST_JOBS) --dist loadgroup,)

# exercises/<ex>.py written from the markers in solutions/<ex>.py (tools/stubs.py)
stubs: .python
	$(INSTRUCTOR_ONLY)
	@$(PY) -m tools.stubs

# The lesson's gpuinfo.py (given code), then the memory ladder: registers, shared memory, L2,
# HBM, sizes from the device, bandwidths measured or derived, the ridge point (tools/gpuinfo.py);
# without a GPU, the lesson's A100 and GB10 figures
gpuinfo: .python
	@$(PY) -m tools.gpuinfo --out $(REPORTS)/gpuinfo

# The lesson's benchmark: attn_bench.json, PNG plots and the Measure table on a GPU; without
# one, the NumPy Measure (naive vs tiled attention on the CPU: time and peak memory against N);
# the grade page (reports/grade.html) shows the last one, written beside it in reports/bench
bench: .python $(STUB_FILES)
	@$(PY) -m tools.bench --submission $(SUBMISSION) --out $(REPORTS)/bench

# dist/student/: what students get (no solutions/, no hidden_tests/), checked
release: .python $(STUB_FILES)
	$(INSTRUCTOR_ONLY)
	@$(PY) -m tools.release --out dist/student

# dist/autograder.zip for Gradescope (setup.sh, run_autograder)
gradescope: .python $(STUB_FILES)
	$(INSTRUCTOR_ONLY)
	@$(PY) -m tools.gradescope --out dist/autograder.zip

# tests/test_gradescope_root.py in a debootstrap root of Gradescope's default image (made once:
# root, debootstrap, overlayfs, cgroups); GRADESCOPE_TORCH_INDEX= installs PyPI's torch instead of
# the CPU index (a machine that cannot reach it)
JAMMY ?= /srv/jammy
gradescope-jammy: .python
	$(INSTRUCTOR_ONLY)
	@$(PY) -m tools.gradescope_root build --root $(JAMMY) --suite jammy
	@mkdir -p $(REPORTS) && GRADESCOPE_ROOT=$(JAMMY) GRADESCOPE_ROOT_LOG=$(REPORTS)/gradescope_jammy.json $(PY) -m pytest -s \
	  tests/test_gradescope_root.py

clean:
	rm -rf $(REPORTS) dist attn_bench.json .pytest_cache
