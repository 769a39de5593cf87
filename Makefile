# Quick start: `make demo` (set up and run a real transposed convolution through the CLI)
# and `make test` (set up, lint, type-check, build the docs, run the whole test suite).
# `make docs` builds the documentation site into docs/_build/html. All create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint docs bench clean

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

# `make test` lints (ruff), type-checks the public API (mypy) and builds the documentation
# with its doctests (warnings are errors) before the tests: each takes seconds.
test: $(VENV)/.test lint docs
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.test
	$(BIN)/ruff check
	$(BIN)/python -m mypy

docs: $(VENV)/.test
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs docs/_build/html
	$(BIN)/python -m sphinx -W --keep-going -q -b doctest docs docs/_build/doctest

bench: $(VENV)/.test
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/convtranspose bench

clean:
	rm -rf $(VENV)
