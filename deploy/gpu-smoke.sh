#!/usr/bin/env bash
# GPU smoke check of the scale-out path (issue 19), one GPU, at most 10 minutes:
#   1. start a vLLM server with SmolLM2-135M in bf16 that accepts weight pushes
#      (`intraskill agent serve smollm2 --weight-updates`, port 8011, as configs/gpu-smoke.toml);
#   2. run 1 round of 2 trainer steps through it, the update launched with accelerate + FSDP on
#      one GPU (`accelerate launch --config_file configs/accelerate_fsdp.yaml --num_processes 1`):
#      rollouts on the server, the weights pushed after each step, the served version checked;
#   3. print, per step, the sampler/trainer log-prob mismatch, the update's tokens/s and the peak
#      GPU memory (from the run's metrics.jsonl).
# The round's end needs an analyst: the recording analyst stand-in (a TEST DOUBLE from tests/)
# takes the all-wrong groups; the gate cannot identify 4 chunks on 2 tasks and is skipped.
#
#   make gpu-smoke                       # or: deploy/gpu-smoke.sh
#   deploy/gpu-smoke.sh --dry-run        # print the commands, run nothing (no GPU needed)
#   deploy/gpu-smoke.sh --report DIR     # print the figures of a finished run folder
#
# Environment: VENV (default .venv, the trainer's), INTRASKILL_VLLM_PYTHON (an interpreter with
# vllm; default .venv-vllm/bin/python), GPU_SMOKE_OUT (default runs/gpu-smoke, emptied first).
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIG=configs/gpu-smoke.toml
PORT=8011  # the port of configs/gpu-smoke.toml's rollout server
LIMIT_S=600
VENV=${VENV:-.venv}
VLLM_PYTHON=${INTRASKILL_VLLM_PYTHON:-.venv-vllm/bin/python}
OUT=${GPU_SMOKE_OUT:-runs/gpu-smoke}

SERVE=("$VENV/bin/intraskill" agent serve smollm2 --weight-updates --python "$VLLM_PYTHON"
  --port "$PORT" --dtype bfloat16 --served-model-name policy --max-model-len 8192
  --gpu-memory-utilization 0.3 --log-file "$OUT/vllm.log" --timeout 300
  --vllm-arg=--enforce-eager)
STANDIN=("$VENV/bin/python" -m tests.trainer.analyst_standin --folder "$OUT/analyst-standin")
TRAIN=("$VENV/bin/accelerate" launch --config_file configs/accelerate_fsdp.yaml --num_processes 1
  -m shared.apps.cli train run --config "$CONFIG" --out "$OUT/run")

report() {  # the figures of a finished run folder, one line per step
  "$VENV/bin/python" - "$1" <<'PY'
import json, sys
from pathlib import Path

lines = [json.loads(l) for l in (Path(sys.argv[1]) / "metrics.jsonl").read_text().splitlines() if l]
for line in lines:
    seconds = line["seconds"]
    weights = line.get("importance_weight") or {}
    peak = line.get("peak_gpu_memory_gb")
    print(
        f"step {line['step']}: log-prob mismatch mean {line['logprob_mismatch']:.2e} "
        f"max {line['logprob_mismatch_max']:.2e}; importance weight mean "
        f"{weights.get('mean', float('nan')):.4f}; update {line['tokens']} tokens in "
        f"{seconds['update_s']:.1f} s = {line['tokens'] / seconds['update_s']:.0f} tokens/s; "
        f"peak GPU memory " + (f"{peak:.2f} GiB" if peak is not None else "n/a (no GPU)")
    )
if not lines:
    sys.exit("no step lines in metrics.jsonl")
PY
}

case "${1:-}" in
  --dry-run)
    printf '%q ' "${SERVE[@]}"; echo
    printf '%q ' "${STANDIN[@]}" --port PORT; echo
    printf '%q ' "${TRAIN[@]}" --analyst-url URL; echo
    exit 0 ;;
  --report)
    report "$2"
    exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--dry-run | --report RUN_DIR]" >&2; exit 2 ;;
esac

# CUDA as both interpreters see it: a vLLM venv without CUDA would serve from the CPU
for python in "$VENV/bin/python" "$VLLM_PYTHON"; do
  if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu-smoke: no CUDA device for $python (a CUDA vLLM and a GPU are needed; deploy/gpu-check.sh checks a GPU without vLLM); nothing was run" >&2
    exit 2
  fi
done
started=$SECONDS
rm -rf "$OUT"; mkdir -p "$OUT"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

echo "gpu-smoke: starting the vLLM server (log: $OUT/vllm.log)"
setsid "${SERVE[@]}" >"$OUT/serve.out" 2>&1 &
pids+=($!)
until grep -q '^base_url: ' "$OUT/serve.out"; do
  if ! kill -0 "${pids[0]}" 2>/dev/null; then cat "$OUT/serve.out" >&2; exit 1; fi
  if (( SECONDS - started > 300 )); then echo "gpu-smoke: no server after 300 s" >&2; exit 1; fi
  sleep 2
done
echo "gpu-smoke: server up after $(( SECONDS - started )) s"

standin_port=$("$VENV/bin/python" -c 'from shared.runtime.agent.serve import free_port; print(free_port())')
setsid "${STANDIN[@]}" --port "$standin_port" >"$OUT/standin.out" 2>&1 &
pids+=($!)

echo "gpu-smoke: training 2 steps through the server"
# the stand-in checks no token, but the trainer refuses a service given by URL without one
TRAINER_ANALYST_TOKEN=${TRAINER_ANALYST_TOKEN:-stand-in} timeout $(( LIMIT_S - (SECONDS - started) )) \
  "${TRAIN[@]}" --analyst-url "http://127.0.0.1:$standin_port"
report "$OUT/run"
echo "gpu-smoke: done in $(( SECONDS - started )) s"
