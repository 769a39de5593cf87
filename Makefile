# Quick start: `make demo` (set up and run a real transposed convolution through the CLI)
# and `make test` (set up and run the whole test suite). Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.core

demo: $(VENV)/.core
	$(BIN)/convtranspose demo

test: $(VENV)/.test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.test
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/convtranspose bench

clean:
	rm -rf $(VENV)
