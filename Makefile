# The README's Quick start: `make run` and `make test` do all set-up themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

UPSTREAM ?= $(TOOLWIRE_UPSTREAM)
MODEL ?= $(TOOLWIRE_MODEL)

run: $(STAMP)
	$(BIN)/toolwire serve $(if $(UPSTREAM),--upstream $(UPSTREAM)) $(if $(MODEL),--model $(MODEL))

test: $(STAMP)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/assembler.py

clean:
	rm -rf $(VENV)
