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

# llama-cpp-python is built for any CPU of the machine's family, not for this
# one (GGML_NATIVE=OFF: AVX2, FMA and F16C on x86-64, no AVX-512, no AMX), so
# the same model prints the same tokens on an AMD EPYC and an Intel Xeon, and
# the outputs in the docs and tests hold on both. The wheel is kept beside
# pip's cache (~/.cache/pip/aerix-wheels/...), so only the first set-up on a
# machine pays for the source build. `make setup LLAMA_CMAKE=-DGGML_NATIVE=ON`
# builds for this CPU instead (faster on AVX-512; outputs may then differ).
LLAMA := $(shell grep -o 'llama-cpp-python==[0-9.]*' pyproject.toml | head -n 1)
LLAMA_CMAKE ?= -DGGML_NATIVE=OFF
LLAMA_WHEELS := $(shell $(PY) -m pip cache dir 2>/dev/null || echo $(HOME)/.cache/pip)/aerix-wheels/$(subst ==,-,$(LLAMA))-$(shell uname -m)-$(shell echo '$(LLAMA_CMAKE)' | cksum | cut -d ' ' -f 1)

$(VENV)/.llama: pyproject.toml | $(BIN)/python
	ls $(LLAMA_WHEELS)/*.whl >/dev/null 2>&1 || CMAKE_ARGS='$(LLAMA_CMAKE)' \
	  $(BIN)/pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python -w $(LLAMA_WHEELS) '$(LLAMA)'
	$(BIN)/pip install -q --no-deps --force-reinstall $(LLAMA_WHEELS)/*.whl
	touch $@

$(VENV)/.installed-demo: pyproject.toml $(VENV)/.llama
	$(BIN)/pip install -q -e '.[llama]'
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.llama
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
