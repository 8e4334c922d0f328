#!/usr/bin/env bash
# The device check for a lent GPU machine (one H200, no network, torch/transformers/accelerate
# already there, <= 10 minutes a command): CUDA first, then in <= 8 minutes
#   1. the paper preset's update at Qwen3.5-4B's true shape (vendored config, random weights)
#      under FSDP on one GPU, bf16 compute over fp32 masters, at 4k and 16k tokens per
#      micro-batch: tokens/s, peak GPU memory, MFU;
#   2. in-process batched generation at that shape in bf16 (fixed lengths): tokens/s;
#   3. `intraskill train run` for 1 round of 2 steps on `cuda` (configs/gpu-check.toml: the
#      simulated TEST DOUBLE policy on the tiny model, a local registry on SQLite).
# One JSON lands in $OUT/gpu-check.json (or the path given). Needs the wheels of
# `make gpu-wheels` in .whl/ (installed with pip --target; no venv is built) and never imports
# the test suite. What it does not cover (vLLM on a GPU, more than one GPU): docs/trainer.md.
#
#   deploy/gpu-check.sh [OUT_JSON]        # PYTHON (default python3): the machine's torch python
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
RESULT=${1:-${OUT:-runs/gpu-check}/gpu-check.json}
WORK=${GPU_CHECK_WORK:-/tmp/intraskill-gpu-check}

if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu-check: no CUDA device here ($PYTHON has no torch that sees one); nothing was run" >&2
  exit 2
fi
if ! ls .whl/*.whl >/dev/null 2>&1; then
  echo "gpu-check: no wheels in .whl/ (run make gpu-wheels where pip reaches an index)" >&2
  exit 2
fi

started=$SECONDS
rm -rf "$WORK"; mkdir -p "$WORK/parts" "$(dirname "$RESULT")"
"$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$WORK/site" .whl/*.whl || { echo "gpu-check: installing .whl/ failed" >&2; exit 1; }
export PYTHONPATH="$PWD:$WORK/site" PYTHONUNBUFFERED=1
echo "gpu-check: wheels installed after $(( SECONDS - started )) s"

step() {  # step NAME SECONDS COMMAND...: run with a time limit; the JSON records a failure
  local name=$1 limit=$2; shift 2
  echo "gpu-check: $name (at most $limit s)"
  timeout "$limit" "$@" >"$WORK/$name.log" 2>&1
  local code=$?
  echo "gpu-check: $name exited $code after $(( SECONDS - started )) s (log $WORK/$name.log)"
  tail -n 5 "$WORK/$name.log"
}

step update 240 "$PYTHON" -m accelerate.commands.launch \
  --config_file configs/accelerate_fsdp.yaml --num_processes 1 \
  -m services.trainer.gpu_check update --out "$WORK/parts/update.json"
step generate 90 "$PYTHON" -m services.trainer.gpu_check generate --out "$WORK/parts/generate.json"
step train_run 150 "$PYTHON" -m shared.apps.cli train run --config configs/gpu-check.toml \
  --out "$WORK/run"
"$PYTHON" -m services.trainer.gpu_check run-figures "$WORK/run" --out "$WORK/parts/train_run.json"

"$PYTHON" -m services.trainer.gpu_check merge "$WORK/parts/update.json" \
  "$WORK/parts/generate.json" "$WORK/parts/train_run.json" --out "$RESULT"
echo "gpu-check: wrote $RESULT after $(( SECONDS - started )) s"
