#!/usr/bin/env bash
# The GPU path in one command, on the demo graph: serve a Qwen3 base with vLLM -> collect a few teacher
# trajectories with it -> distill a LoRA student for a few steps -> serve base + adapter on one vLLM
# server -> run ARK with the student through the runner on a few test queries -> check the run.
#
#   scripts/gpu_check.sh                      # Qwen3-4B, 6 train queries, 5 LoRA steps, 3 test queries
#   scripts/gpu_check.sh --size 8b --steps 10 --out results/gpu_check-8b
#   scripts/gpu_check.sh --dry-run            # print every command, run nothing (works without a GPU)
#
# Options: --size 4b|8b (base Qwen/Qwen3-4B or -8B), --queries N (train queries collected; the adapter is
#   demo-qwen3-<size>-<N>), --steps S (LoRA steps), --limit L (test queries), --port (8011),
#   --out DIR (results/gpu_check), --py PYTHON (the experiment environment, .venv/bin/python: needs
#   requirements-distill.txt and a CUDA torch), --vllm-bin DIR (where `vllm` is, .venv-gpu/bin:
#   requirements-gpu.txt), --dry-run.
# Needs the base model in the local Hugging Face cache (the check never downloads; on a machine with
# network: huggingface-cli download Qwen/Qwen3-4B). Exits non-zero at the first failing step.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
SIZE=4b; QUERIES=6; STEPS=5; LIMIT=3; PORT=8011; OUT=results/gpu_check; PY=.venv/bin/python
VLLM_BIN=.venv-gpu/bin; DRY=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --size) SIZE="$2"; shift 2 ;;
    --queries) QUERIES="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --limit) LIMIT="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --py) PY="$2"; shift 2 ;;
    --vllm-bin) VLLM_BIN="$2"; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "unknown option $1; valid: --size --queries --steps --limit --port --out --py --vllm-bin --dry-run" >&2; exit 2 ;;
  esac
done
case "$SIZE" in 4b|8b) ;; *) echo "--size $SIZE: valid sizes are 4b, 8b" >&2; exit 2 ;; esac
MODEL="Qwen/Qwen3-${SIZE^^}"
TEACHER="qwen3-$SIZE"                      # conf/backbone/qwen3-<size>.yaml: the base model as teacher
STUDENT="student-$SIZE-600"                # conf/backbone/student-<size>-*.yaml, pointed at our adapter
ADAPTER="demo-qwen3-$SIZE-$QUERIES"        # = distill.name for graph=demo, size, n_queries
URL="http://127.0.0.1:$PORT/v1"
RUNS="$OUT/runs"
COMMON=(graph=demo "paths.runs=$RUNS" "backbone.base_url=$URL" progress=false)

run() { echo "+ $*"; [[ $DRY -eq 1 ]] || "$@"; }

SERVER_PID=""
stop_server() {
  [[ -n "$SERVER_PID" ]] || return 0
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}
trap stop_server EXIT

serve() {  # serve the base (and the adapters under $OUT/distill when asked) in the background
  echo "+ scripts/serve_vllm.sh $MODEL --port $PORT $* &"
  [[ $DRY -eq 1 ]] && return 0
  mkdir -p "$OUT"
  PATH="$VLLM_BIN:$PATH" scripts/serve_vllm.sh "$MODEL" --port "$PORT" "$@" -- --max-model-len 16384 \
    >"$OUT/vllm.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 900); do  # model load and CUDA graph capture take minutes
    curl -sf "$URL/models" >/dev/null 2>&1 && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "vLLM exited; last lines of $OUT/vllm.log:" >&2; tail -20 "$OUT/vllm.log" >&2; exit 1; }
    sleep 1
  done
  echo "vLLM did not answer on $URL within 15 minutes ($OUT/vllm.log)" >&2; exit 1
}

if [[ $DRY -eq 0 ]]; then
  [[ -x "$PY" ]] || { echo "$PY not found: make install-distill (and a CUDA torch in that environment)" >&2; exit 1; }
  [[ -x "$VLLM_BIN/vllm" ]] || { echo "$VLLM_BIN/vllm not found: python -m venv .venv-gpu && .venv-gpu/bin/pip install -r requirements-gpu.txt" >&2; exit 1; }
  "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
    || { echo "$PY has no CUDA torch: install the CUDA build of torch into it for LoRA training" >&2; exit 1; }
  HF_HUB_OFFLINE=1 "$PY" -c "from huggingface_hub import snapshot_download as s; s('$MODEL', local_files_only=True)" >/dev/null 2>&1 \
    || { echo "$MODEL is not in the Hugging Face cache; on a machine with network: huggingface-cli download $MODEL" >&2; exit 1; }
fi
export HF_HUB_OFFLINE=1 WANDB_MODE=offline

echo "[1/4] teacher trajectories: $MODEL (base) on $QUERIES demo train queries and 2 validation queries"
serve
run "$PY" experiments/collect.py experiment=collect "backbone=$TEACHER" "${COMMON[@]}" \
    "collect.n_queries=$QUERIES" collect.trajectories_per_query=2 collect.t_max=6
run "$PY" experiments/collect.py experiment=collect "backbone=$TEACHER" "${COMMON[@]}" split=val \
    collect.n_queries=2 collect.trajectories_per_query=2 collect.t_max=6
stop_server

echo "[2/4] LoRA student: $STEPS steps on the GPU -> $OUT/distill/$ADAPTER/adapter"
run "$PY" experiments/distill.py experiment=distill "backbone=$TEACHER" graph=demo "paths.runs=$RUNS" \
    "distill.size=$SIZE" "distill.student.model=$MODEL" "distill.n_queries=$QUERIES" \
    "distill.train.output_dir=$OUT/distill/$ADAPTER" "distill.train.max_steps=$STEPS" \
    "distill.train.eval_steps=$STEPS" "distill.train.report_to=[]"

echo "[3/4] one vLLM server: $MODEL with the adapter $ADAPTER"
serve --adapters "$OUT/distill"

echo "[4/4] ARK with the student through the runner on $LIMIT demo test queries"
run "$PY" -m ark run experiment=backbones "backbone=$STUDENT" "backbone.model=$ADAPTER" "${COMMON[@]}" \
    "limit=$LIMIT" budget=t5_n1
stop_server

run "$PY" - "$RUNS" "$LIMIT" <<'PY'
import json, sys
from pathlib import Path
runs, limit = Path(sys.argv[1]), int(sys.argv[2])
found = sorted(runs.glob("backbones/demo/*/metrics.json"))
assert found, f"no run under {runs}/backbones/demo"
m = json.loads(found[-1].read_text())
trajs = [t for f in sorted((found[-1].parent / "trajectories").glob("*.json")) for t in json.loads(f.read_text())]
calls = sum(len(s["tool_calls"]) for t in trajs for s in t["steps"])
print(f"{found[-1].parent}: {m['n_ok']}/{m['n']} queries ok, {len(trajs)} trajectories, {calls} parsed tool calls")
assert m["n_ok"] == m["n"] == limit, "some queries failed: see predictions.jsonl"
assert calls > 0, "the student made no parsed tool call"
print("GPU check passed")
PY
