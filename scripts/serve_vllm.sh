#!/usr/bin/env bash
# Serve a backbone with vLLM's OpenAI-compatible server, with tool calling on (GPU machines only).
#
#   scripts/serve_vllm.sh Qwen/Qwen3-8B                       # -> http://127.0.0.1:8000/v1, model "Qwen/Qwen3-8B"
#   scripts/serve_vllm.sh Qwen/Qwen3-4B --port 8001 --name qwen3-4b
#   scripts/serve_vllm.sh Qwen/Qwen3-8B --adapter results/distill/student   # LoRA served as model "student"
#   scripts/serve_vllm.sh Qwen/Qwen3-8B -- --max-model-len 32768 --gpu-memory-utilization 0.85
#
# Options: --host (default 127.0.0.1), --port (8000), --name (served model name; default the model id),
#          --adapter PATH (LoRA; adds --enable-lora --lora-modules student=PATH), --lora-name (student),
#          --max-lora-rank (64), everything after `--` goes to `vllm serve` verbatim.
# Client side (conf/backbone/*.yaml): provider: vllm, base_url: http://HOST:PORT/v1, model: the served
# name (or the LoRA name), extra_body: {chat_template_kwargs: {enable_thinking: false}} for Qwen3.
# Install: pip install -r requirements-gpu.txt (in its own environment; vLLM pins its own torch).
# Qwen3 emits <tool_call>{...}</tool_call> blocks: the `hermes` parser turns them into OpenAI tool_calls.
set -euo pipefail

usage() { sed -n '2,16p' "$0"; exit "${1:-0}"; }
[[ $# -ge 1 ]] || usage 2
case "$1" in -h|--help) usage 0 ;; esac
MODEL="$1"; shift
HOST=127.0.0.1; PORT=8000; NAME=""; ADAPTER=""; LORA_NAME=student; MAX_LORA_RANK=64; EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --host) HOST="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --name) NAME="$2"; shift 2 ;;
    --adapter) ADAPTER="$2"; shift 2 ;;
    --lora-name) LORA_NAME="$2"; shift 2 ;;
    --max-lora-rank) MAX_LORA_RANK="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage 0 ;;
    *) echo "unknown option $1; valid: --host --port --name --adapter --lora-name --max-lora-rank --" >&2; exit 2 ;;
  esac
done

command -v vllm >/dev/null || { echo "vllm not found; install with: pip install -r requirements-gpu.txt" >&2; exit 1; }

ARGS=(serve "$MODEL" --host "$HOST" --port "$PORT"
      --enable-auto-tool-choice --tool-call-parser hermes)
[[ -n "$NAME" ]] && ARGS+=(--served-model-name "$NAME")
if [[ -n "$ADAPTER" ]]; then
  [[ -d "$ADAPTER" ]] || { echo "adapter directory $ADAPTER does not exist" >&2; exit 1; }
  ARGS+=(--enable-lora --lora-modules "$LORA_NAME=$ADAPTER" --max-lora-rank "$MAX_LORA_RANK")
fi
ARGS+=("${EXTRA[@]}")
echo "+ vllm ${ARGS[*]}" >&2
exec vllm "${ARGS[@]}"
