#!/usr/bin/env bash
# Create (or reuse) the comparison-tier environment .venv-compare: stark-qa 1.1.0 next to ark.
#
#   bash tests/comparison/make_env.sh          # then: .venv-compare/bin/pytest -m comparison tests/comparison
#
# stark-qa declares ~23 dependencies (colbert-ai, gritlm, llm2vec, PyTDC, voyageai, ...), most of them for
# its retrieval models. We install it with --no-deps plus the minimum that lets
# `from stark_qa.skb import PrimeSKB, MagSKB, AmazonSKB` and `stark_qa.evaluator` import. PyTDC (used only
# to build PRIME from raw files) is replaced by a stand-in in tests/comparison/conftest.py: its import
# chain needs numpy<2, pandas<3, cellxgene-census, tiledbsoma<2, gget, mysql and rdkit.
# torch is pinned first: the CPU wheel of torch==2.13.0 is on this machine's disk (an unpinned torch
# would download several GB of CUDA wheels).
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${VENV:-.venv-compare}"
PY="${PYTHON:-python3}"
STAMP="$VENV/.ark-compare-stamp"
WANT="$(cat tests/comparison/make_env.sh requirements.txt | sha256sum | cut -c1-16)"

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  echo "$VENV is up to date"
  exit 0
fi

"$PY" -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install -q torch==2.13.0
"$PIP" install -q "setuptools<81"
"$PIP" install -q -r requirements.txt
# stark-qa and colbert-ai without their declared dependencies, then what their imports really need
"$PIP" install -q --no-deps stark-qa==1.1.0 colbert-ai
"$PIP" install -q gdown langdetect beautifulsoup4 nltk langchain-text-splitters torchmetrics==1.9.0 anthropic \
  transformers ogb ujson gitpython
"$PIP" install -q --no-deps -e .
# torchmetrics changed MRR/Recall in 1.7.4 (gold with score <= 0 ignored); the venv has 1.9.0, and 1.7.0
# sits beside it (imported by a subprocess of test_metrics_vs_stark.py) so both behaviours are checked
"$PIP" install -q --no-deps --upgrade --target "$VENV/torchmetrics-1.7.0" torchmetrics==1.7.0
"$VENV/bin/python" - <<'EOF'
import sys, types
sys.modules.setdefault("tdc", types.ModuleType("tdc"))
mod = types.ModuleType("tdc.resource"); mod.PrimeKG = object; sys.modules.setdefault("tdc.resource", mod)
from stark_qa.skb import PrimeSKB, MagSKB, AmazonSKB  # noqa: F401
import stark_qa.evaluator  # noqa: F401
import ark.data.stark  # noqa: F401
print("stark-qa", __import__("importlib.metadata").metadata.version("stark-qa"), "imports fine")
EOF
echo "$WANT" > "$STAMP"
