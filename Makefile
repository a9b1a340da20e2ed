# One command each: `make demo` runs a real agent on the embedded model,
# `make check` runs every check (lint, types, tests, docs). Both set up .venv.

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
EXTRAS := llama,server,playground,mcp,otel,docs,dev
PROMPT ?= What is 17 * 23?

.PHONY: demo check setup lint types test docs bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# pip keeps the llama-cpp-python wheel it builds in its cache (~/.cache/pip),
# so only the first set-up on a machine pays for the source build.
$(VENV)/.installed-demo: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[llama]'
	touch $@

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $@ $(VENV)/.installed-demo

setup: $(VENV)/.installed

demo: $(VENV)/.installed-demo
	$(BIN)/aerix run "$(PROMPT)"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: setup
	$(BIN)/mypy

test: setup
	$(BIN)/python -m pytest

docs: setup
	$(BIN)/mkdocs build --strict --site-dir site

check: lint types test docs

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache
