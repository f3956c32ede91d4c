#!/usr/bin/env bash
# Lathe and the peers on a busy machine: a CPU-bound load (a shell busy loop, pinned with taskset
# to the --busy cores, killed when the script ends) runs while each engine is timed at 1 thread
# and at its default thread count (Lathe: no --threads, so its CPU-share rule decides; ONNX
# Runtime and OpenVINO: all cores), model by model.
#
#   bench/contention.sh [--busy "1"] [--repeat N] [--only NAME] [--idle] [--no-peers]
#
# --idle runs the same table without the load (the "nothing gets slower" check). Prints one
# markdown table (ms, median of --repeat) with compile at the default over compile at 1 thread
# (the target: <= 1.10) and the best peer at its best thread count over Lathe compile at the
# default (> 1: Lathe is faster). Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
BUSY="1" REPEAT=10 ONLY="" IDLE=0 PEERS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --busy) BUSY="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --idle) IDLE=1; shift ;;
    --no-peers) PEERS=0; shift ;;
    *) echo "contention.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
PY=.venv/bin/python
[ -x build/lathe-bench ] || { echo "contention.sh: build first (scripts/setup.sh)" >&2; exit 2; }
MODELS="resnet18 resnet50 resnext50_32x4d alexnet mobilenet_v2 mnasnet1_0 squeezenet1_1 vgg16 bert vit"
[ -n "$ONLY" ] && MODELS="$ONLY"
ALL=$(nproc)
TMP=$(mktemp -d)
LOAD_PIDS=()
stop_load() { for p in "${LOAD_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; LOAD_PIDS=(); }
trap 'stop_load; rm -rf "$TMP"' EXIT
start_load() {
  [ "$IDLE" = 1 ] && return
  for c in ${BUSY//,/ }; do
    taskset -c "$c" sh -c 'while :; do :; done' &
    LOAD_PIDS+=($!)
  done
}

cell() { awk -F'|' -v m="$1" -v n="$2" '$2 ~ "^ *"m {gsub(/^ +| +$/,"",$n); print $n; exit}'; }
lathe_ms() {  # model, extra flags...: prints eager_ms compile_ms
  local m="$1"; shift
  build/lathe-bench --performance --inference --only "$m" --backend eager,compile \
    --repeat "$REPEAT" --blocked --csv "$TMP/l.csv" "$@" >/dev/null 2>"$TMP/l.err" ||
    { cat "$TMP/l.err" >&2; exit 1; }
  awk -F, 'NR==1 {for (i=1;i<=NF;i++) c[$i]=i} NR==2 {print $c["eager_ms"], $c["compile_ms"]}' "$TMP/l.csv"
}
peer_ms() {  # script, model, threads
  $PY "bench/$1" --only "$2" --repeat "$REPEAT" --threads "$3" 2>>"$TMP/peers.err" | cell "$2" 4
}

reason=$(build/lathe-bench --performance --inference --only squeezenet1_1 --backend eager --repeat 1 \
         --warmup 0 2>&1 >/dev/null | awk '/ threads: / && !done {sub(/^\[lathe-bench\] /, ""); print; done = 1}')
load="load: busy loop on core(s) $BUSY"
[ "$IDLE" = 1 ] && load="idle (no load)"
echo "Lathe $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(lscpu | sed -n 's/^Model name: *//p'), $ALL cores, $load, median of $REPEAT, $(date -u +%Y-%m-%d); Lathe's default: $reason"
echo
echo "| model | eager 1t | eager default | compile 1t | compile default | default / 1t | ort 1t | ort ${ALL}t | openvino 1t | openvino ${ALL}t | best peer / compile default |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for m in $MODELS; do
  start_load
  echo "[contention] $m: lathe" >&2
  read -r e1 c1 < <(lathe_ms "$m" --threads 1)
  read -r ed cd < <(lathe_ms "$m")
  o1="-" oa="-" v1="-" va="-"
  if [ "$PEERS" = 1 ]; then
    echo "[contention] $m: peers" >&2
    o1=$(peer_ms peer_onnxruntime.py "$m" 1); oa=$(peer_ms peer_onnxruntime.py "$m" "$ALL")
    v1=$(peer_ms peer_openvino.py "$m" 1); va=$(peer_ms peer_openvino.py "$m" "$ALL")
  fi
  stop_load
  best=$(printf '%s\n' "$o1" "$oa" "$v1" "$va" | awk '$1 ~ /^[0-9.]+$/ && (b == "" || $1 + 0 < b) {b = $1 + 0} END {print b}')
  ratio=$(awk -v a="$cd" -v b="$c1" 'BEGIN {printf "%.2f", a / b}')
  vs=$(awk -v p="$best" -v l="$cd" 'BEGIN {if (p + 0 > 0) printf "%.2f", p / l; else print "-"}')
  printf '| %s | %.1f | %.1f | %.1f | %.1f | %s | %s | %s | %s | %s | %s |\n' \
    "$m" "$e1" "$ed" "$c1" "$cd" "$ratio" "$o1" "$oa" "$v1" "$va" "$vs"
done
