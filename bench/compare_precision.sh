#!/usr/bin/env bash
# f32 against bf16, Lathe and OpenVINO side by side, model by model: Lathe eager (f32), compile
# (f32) and compile:bf16 (CompileOptions::precision bf16) in one lathe-bench process, then
# OpenVINO with INFERENCE_PRECISION_HINT f32 and at its default precision (bf16 on avx512_bf16 /
# AMX CPUs; what it reports goes to stderr and into the last column).
#
#   bench/compare_precision.sh [--batch-size N] [--repeat N] [--threads N] [--only "NAMES"]
#
# Prints one markdown table (ms, median of --repeat) with compile f32 / compile bf16 (the bf16
# speedup) and OpenVINO bf16 / Lathe bf16 (> 1: Lathe is faster). Run it on a quiet machine, or
# pinned (taskset -c 0 ... --threads 1).
set -euo pipefail
cd "$(dirname "$0")/.."
BATCH=1 REPEAT=10 THREADS="${LATHE_NUM_THREADS:-$(nproc)}" ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --batch-size) BATCH="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    *) echo "compare_precision.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
PY=.venv/bin/python
[ -x build/lathe-bench ] || { echo "compare_precision.sh: build first (scripts/setup.sh)" >&2; exit 2; }
if ! $PY -c "import openvino" 2>/dev/null; then
  echo "[compare_precision] installing openvino into .venv" >&2
  .venv/bin/pip install -q openvino >&2
fi
MODELS="resnet18 resnet50 resnext50_32x4d alexnet mobilenet_v2 mnasnet1_0 squeezenet1_1 vgg16 bert vit"
[ -n "$ONLY" ] && MODELS="$ONLY"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cell() { awk -F'|' -v m="$1" -v n="$2" '$2 ~ "^ *"m {gsub(/^ +| +$/,"",$n); print $n; exit}'; }

flags=$(lscpu | grep -o -w 'avx512_bf16\|amx_bf16' | sort -u | tr '\n' ' ')
echo "Lathe $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(lscpu | sed -n 's/^Model name: *//p') (${flags:-no bf16 flags}), batch $BATCH, $THREADS threads, median of $REPEAT, $(date -u +%Y-%m-%d)"
echo
echo "| model | lathe eager f32 | compile f32 | compile bf16 | bf16 speedup | openvino f32 | openvino default | openvino default / compile bf16 | openvino reports |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
for m in $MODELS; do
  echo "[compare_precision] $m: lathe" >&2
  build/lathe-bench --performance --inference --only "$m" --backend eager,compile,compile:bf16 \
    --batch-size "$BATCH" --repeat "$REPEAT" --threads "$THREADS" --blocked --csv "$TMP/l.csv" \
    >/dev/null 2>"$TMP/l.err" || { cat "$TMP/l.err" >&2; exit 1; }
  read -r le lc lb < <(awk -F, 'NR==1 {for (i=1;i<=NF;i++) c[$i]=i}
    NR==2 {print $c["eager_ms"], $c["compile_ms"], $c["compile:bf16_ms"]}' "$TMP/l.csv")
  echo "[compare_precision] $m: openvino" >&2
  of=$($PY bench/peer_openvino.py --only "$m" --batch-size "$BATCH" --repeat "$REPEAT" \
       --threads "$THREADS" --precision f32 2>>"$TMP/ov.err" | cell "$m" 4)
  od=$($PY bench/peer_openvino.py --only "$m" --batch-size "$BATCH" --repeat "$REPEAT" \
       --threads "$THREADS" --precision default 2>"$TMP/ovd.err" | cell "$m" 4)
  rep=$(grep -o 'reports [^)]*' "$TMP/ovd.err" | tail -1 | sed 's/reports //')
  sp=$(awk -v a="$lc" -v b="$lb" 'BEGIN {printf "%.2f", a / b}')
  vs=$(awk -v p="$od" -v l="$lb" 'BEGIN {if (p + 0 > 0) printf "%.2f", p / l; else print "-"}')
  printf '| %s | %.2f | %.2f | %.2f | %s | %s | %s | %s | %s |\n' "$m" "$le" "$lc" "$lb" "$sp" \
    "$of" "$od" "$vs" "${rep:-?}"
done
