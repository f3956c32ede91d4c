#!/usr/bin/env bash
# Lathe eager next to PyTorch eager, model by model in one run (so both see the same machine):
#   bench/compare_eager.sh [--batch-size N] [--repeat N] [--threads N] [--only NAME]
# Prints a markdown table: | model | batch | lathe ms | torch ms | torch/lathe |.
# torch runs with channels-last images too (its fastest CPU layout), as Lathe does.
set -euo pipefail
cd "$(dirname "$0")/.."
BATCH=1 REPEAT=10 THREADS="${LATHE_NUM_THREADS:-$(nproc)}" ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --batch-size) BATCH="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
MODELS="resnet18 resnet50 resnext50_32x4d alexnet mobilenet_v2 mnasnet1_0 squeezenet1_1 vgg16 bert vit"
[ -n "$ONLY" ] && MODELS="$ONLY"
echo "| model | batch | lathe eager ms | torch eager ms | torch / lathe |"
echo "| --- | --- | --- | --- | --- |"
for m in $MODELS; do
  echo "[compare] $m" >&2
  l=$(build/lathe-bench --only "$m" --backend eager --batch-size "$BATCH" --repeat "$REPEAT" \
      --threads "$THREADS" 2>/dev/null |
      awk -F'|' -v m="$m" '$2 ~ m {gsub(/ /,"",$3); print $3}')
  t=$(.venv/bin/python bench/peer_torch.py --only "$m" --batch-size "$BATCH" --repeat "$REPEAT" \
      --threads "$THREADS" --channels-last 2>/dev/null |
      awk -F'|' -v m="$m" '$2 ~ m {gsub(/ /,"",$4); print $4}')
  ratio=$(awk -v a="$l" -v b="$t" 'BEGIN { if (a > 0) printf "%.2fx", b / a; else print "?" }')
  echo "| $m | $BATCH | $l | $t | $ratio |"
done
