#!/usr/bin/env bash
# The SLURM tier: start a single-node cluster (tests/slurm/cluster.py), run tests/slurm against it, and
# stop it at the end, whatever happens (also when a test fails or the run is interrupted).
#   bash tests/slurm/run.sh [PYTHON] [pytest arguments...]        # make test-slurm
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${1:-.venv/bin/python}"; shift || true
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
DIR="$(mktemp -d /tmp/ark-slurm.XXXXXX)"
stop() { "$PY" -m tests.slurm.cluster stop "$DIR" || true; rm -rf "$DIR"; }
trap stop EXIT
trap 'exit 130' INT TERM
"$PY" -m tests.slurm.cluster start "$DIR"
ARK_SLURM_TEST_CONF="$DIR/slurm.conf" "$PY" -m pytest -q -m slurm tests/slurm "$@"
