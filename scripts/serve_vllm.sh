#!/usr/bin/env bash
# Serve one base model with vLLM's OpenAI-compatible server, tool calling on, and every LoRA student of
# that base on the same server (GPU machines only): one server per base model, not one per adapter.
#
#   scripts/serve_vllm.sh Qwen/Qwen3-8B                                   # base only, port 8000
#   scripts/serve_vllm.sh Qwen/Qwen3-8B --adapters results/distill        # + every Qwen3-8B adapter there
#   scripts/serve_vllm.sh Qwen/Qwen3-4B --port 8001 --adapters results/distill
#   scripts/serve_vllm.sh Qwen/Qwen3-8B --adapter prime-qwen3-8b-600=results/distill/prime-qwen3-8b-600/adapter
#   scripts/serve_vllm.sh Qwen/Qwen3-8B --dry-run --adapters results/distill   # print the command only
#   scripts/serve_vllm.sh Qwen/Qwen3-8B -- --max-model-len 32768 --gpu-memory-utilization 0.85
#   scripts/serve_vllm.sh Qwen/Qwen3-8B --replicas 4 --host 0.0.0.0     # 4 servers on 4 GPUs, ports 8000-8003
#
# Options: --host (127.0.0.1), --port (8000), --name (served name of the base; default the model id),
#   --replicas N (1): N servers of the same model and adapters, replica i on port PORT+i and on GPUs
#       i*K .. i*K+K-1 of CUDA_VISIBLE_DEVICES (a SLURM job's GPUs; 0,1,... when unset), K = --gpus-per-replica
#       (1; K > 1 adds --tensor-parallel-size K); prints the backbone.base_url=[...] override that spreads
#       ARK's requests over them (ark/llm/replicas.py); stops them all when one stops or on Ctrl-C,
#   --adapters DIR: serve each DIR/<name>/adapter whose adapter_config.json names this base model, as
#       model "<name>" (experiments/distill.py writes results/distill/<graph>-qwen3-<size>-<n>/adapter,
#       so the served name carries the graph the adapter was trained on);
#   --adapter NAME=PATH (repeatable; PATH alone serves it under the name of PATH's parent folder),
#   --max-lora-rank (64; students use r=32), --max-loras (adapters in one batch; default all of them),
#   --dry-run (print the vllm command and exit), everything after `--` goes to `vllm serve` verbatim.
# Client side (conf/backbone/*.yaml): qwen3-8b and student-8b-* at http://127.0.0.1:8000/v1
# (ARK_VLLM_URL_QWEN3_8B), qwen3-4b and student-4b-* at :8001 (ARK_VLLM_URL_QWEN3_4B).
# Install: pip install -r requirements-gpu.txt (in its own environment; vLLM pins its own torch).
# Qwen3 emits <tool_call>{...}</tool_call> blocks: the `hermes` parser turns them into OpenAI tool_calls.
set -euo pipefail

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
[[ $# -ge 1 ]] || usage 2
case "$1" in -h|--help) usage 0 ;; -*) echo "the first argument is the base model id (e.g. Qwen/Qwen3-8B), got $1" >&2; exit 2 ;; esac
MODEL="$1"; shift
HOST=127.0.0.1; PORT=8000; NAME=""; ADAPTERS_DIR=""; MAX_LORA_RANK=64; MAX_LORAS=""; DRY=0; REPLICAS=1; PER=1
ADAPTERS=(); EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --host) HOST="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --name) NAME="$2"; shift 2 ;;
    --adapters) ADAPTERS_DIR="$2"; shift 2 ;;
    --adapter) ADAPTERS+=("$2"); shift 2 ;;
    --max-lora-rank) MAX_LORA_RANK="$2"; shift 2 ;;
    --max-loras) MAX_LORAS="$2"; shift 2 ;;
    --replicas) REPLICAS="$2"; shift 2 ;;
    --gpus-per-replica) PER="$2"; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage 0 ;;
    *) echo "unknown option $1; valid: --host --port --name --adapters --adapter --max-lora-rank --max-loras --replicas --gpus-per-replica --dry-run --" >&2; exit 2 ;;
  esac
done

# name=path pairs: explicit ones, then the adapters under --adapters trained on this base model
MODULES=()
for a in "${ADAPTERS[@]}"; do
  if [[ "$a" == *=* ]]; then name="${a%%=*}"; path="${a#*=}"; else path="$a"; name="$(basename "$(dirname "$(realpath -m "$a")")")"; fi
  [[ -f "$path/adapter_config.json" ]] || { echo "no LoRA adapter at $path (adapter_config.json missing)" >&2; exit 1; }
  MODULES+=("$name=$path")
done
if [[ -n "$ADAPTERS_DIR" ]]; then
  [[ -d "$ADAPTERS_DIR" ]] || { echo "--adapters $ADAPTERS_DIR is not a directory" >&2; exit 1; }
  # PEFT records the base in adapter_config.json ("base_model_name_or_path"): a model id or a local path
  while IFS= read -r line; do MODULES+=("$line"); done < <(python3 - "$MODEL" "$ADAPTERS_DIR" <<'PY'
import json, sys
from pathlib import Path
model, root = sys.argv[1], Path(sys.argv[2])
want = model.rstrip("/").split("/")[-1].lower()
for cfg in sorted(root.glob("*/adapter/adapter_config.json")):
    base = str(json.loads(cfg.read_text()).get("base_model_name_or_path") or "")
    if base == model or base.rstrip("/").split("/")[-1].lower() == want:
        print(f"{cfg.parent.parent.name}={cfg.parent}")
PY
)
  [[ ${#MODULES[@]} -gt 0 ]] || { echo "no adapter of $MODEL under $ADAPTERS_DIR (looked for */adapter/adapter_config.json)" >&2; exit 1; }
fi

ARGS=(serve "$MODEL" --host "$HOST" --port "$PORT"
      --enable-auto-tool-choice --tool-call-parser hermes)
[[ -n "$NAME" ]] && ARGS+=(--served-model-name "$NAME")
if [[ ${#MODULES[@]} -gt 0 ]]; then
  ARGS+=(--enable-lora --max-lora-rank "$MAX_LORA_RANK" --max-loras "${MAX_LORAS:-${#MODULES[@]}}" --lora-modules "${MODULES[@]}")
fi
ARGS+=("${EXTRA[@]}")
if [[ "$REPLICAS" == 1 && "$PER" == 1 ]]; then
  echo "+ vllm ${ARGS[*]}" >&2
  [[ $DRY -eq 1 ]] && exit 0
  command -v vllm >/dev/null || { echo "vllm not found; install with: pip install -r requirements-gpu.txt" >&2; exit 1; }
  exec vllm "${ARGS[@]}"
fi

# N replicas: each its own GPUs and port; the ARGS' --port is replaced per replica
[[ "$REPLICAS" =~ ^[1-9][0-9]*$ && "$PER" =~ ^[1-9][0-9]*$ ]] || { echo "--replicas and --gpus-per-replica take a whole number >= 1, got $REPLICAS and $PER" >&2; exit 2; }
if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then IFS=, read -r -a GPUS <<< "$CUDA_VISIBLE_DEVICES"; else GPUS=($(seq 0 $((REPLICAS * PER - 1)))); fi
(( ${#GPUS[@]} >= REPLICAS * PER )) || { echo "--replicas $REPLICAS x --gpus-per-replica $PER needs $((REPLICAS * PER)) GPUs; CUDA_VISIBLE_DEVICES has ${#GPUS[@]} (${CUDA_VISIBLE_DEVICES})" >&2; exit 2; }
URL_HOST="$HOST"; [[ "$HOST" == 0.0.0.0 ]] && URL_HOST="$(hostname)"
URLS=(); PIDS=()
[[ $DRY -eq 1 ]] || command -v vllm >/dev/null || { echo "vllm not found; install with: pip install -r requirements-gpu.txt" >&2; exit 1; }
[[ $DRY -eq 1 ]] || trap 'kill "${PIDS[@]}" 2>/dev/null; wait' EXIT INT TERM
for ((i = 0; i < REPLICAS; i++)); do
  ids=$(IFS=,; echo "${GPUS[*]:$((i * PER)):$PER}")
  R=("${ARGS[@]}")
  for j in "${!R[@]}"; do [[ "${R[$j]}" == --port ]] && R[$((j + 1))]=$((PORT + i)); done
  (( PER > 1 )) && R+=(--tensor-parallel-size "$PER")
  echo "+ CUDA_VISIBLE_DEVICES=$ids vllm ${R[*]}" >&2
  URLS+=("http://$URL_HOST:$((PORT + i))/v1")
  [[ $DRY -eq 1 ]] || { CUDA_VISIBLE_DEVICES="$ids" vllm "${R[@]}" & PIDS+=($!); }
done
echo "backbone.base_url=[$(IFS=,; echo "${URLS[*]}")]"
[[ $DRY -eq 1 ]] && exit 0
wait -n "${PIDS[@]}"   # one replica stopped: stop the others (the trap), with its exit status
