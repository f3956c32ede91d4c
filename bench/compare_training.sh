#!/usr/bin/env bash
# Lathe's training step (lathe-bench --training, eager) and PyTorch's (eager and torch.compile,
# bench/peer_torch_training.py) side by side, model by model in one sequence, same threads.
#   bench/compare_training.sh [--batch-size N] [--repeat N] [--warmup N] [models...]
# (default: batch 8, repeat 5, warmup 1; resnet18 bert). Run from the repository root after
# building lathe-bench in build/.
set -euo pipefail
batch=8 repeat=5 warmup=1
models=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --batch-size) batch="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
[[ ${#models[@]} -eq 0 ]] && models=(resnet18 bert)
python="${LATHE_PYTHON:-.venv/bin/python}"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
for m in "${models[@]}"; do
  echo "## $m, batch $batch (load $(cut -d' ' -f1-3 /proc/loadavg))"
  build/lathe-bench --training --only "$m" --batch-size "$batch" --backend eager \
    --repeat "$repeat" --warmup "$warmup" 2>/dev/null | grep "^| $m "
  "$python" bench/peer_torch_training.py --only "$m" --batch-size "$batch" --repeat "$repeat" \
    --warmup "$warmup" --compile 2>/dev/null | grep -E "^\| (bert|$m)"
done
