#!/usr/bin/env bash
# Lathe and the CPU peers side by side, model by model in one sequence (so all see the same
# machine): Lathe eager, lazy ("trace every time", the lazy device) and compile ("trace once",
# lathe::compile, model on the lazy device) with the default optimizing "cpu" backend and with
# the reference interpreter; PyTorch eager (channels-last images), torch.compile (inductor,
# freezing), ONNX Runtime and OpenVINO (both from a TorchScript ONNX export, opset 17).
#
#   bench/compare_peers.sh [--batch-sizes "1 8"] [--repeat N] [--threads N] [--only NAME]
#                          [--no-torch-compile] [--precision f32|bf16]
#
# --precision bf16: Lathe's compile runs with CompileOptions::precision bf16 (eager and lazy stay
# f32), PyTorch eager and torch.compile under torch.autocast("cpu", torch.bfloat16), OpenVINO at
# its default precision (bf16 on avx512_bf16 / AMX CPUs; the precision it reports goes to stderr),
# ONNX Runtime in f32 (its CPU provider has no bf16 mode).
#
# Prints one markdown table (milliseconds, median of --repeat) with the best peer and the ratio
# best peer ms / Lathe's compile ms on the default backend (> 1: Lathe is faster), and the
# seconds of Lathe's first compiled call (trace + compile + one run, the first compile of the
# model in the process). Every engine is timed the same way: its own calls back to back after a
# warm-up (lathe-bench --blocked; the peer scripts time one engine per loop), so each sees its
# own weights in cache, not the previous engine's. Progress goes to stderr. Installs
# OpenVINO into the project venv when it is missing. About 15 minutes for ten models at batch 1
# on 2 cores (torch.compile alone takes 7-30 s per model; --no-torch-compile skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
BATCHES="1" REPEAT=20 THREADS="${LATHE_NUM_THREADS:-$(nproc)}" ONLY="" TORCH_COMPILE=1 PRECISION=f32
while [ $# -gt 0 ]; do
  case "$1" in
    --batch-sizes) BATCHES="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --no-torch-compile) TORCH_COMPILE=0; shift ;;
    --precision) PRECISION="$2"; shift 2 ;;
    *) echo "compare_peers.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
case "$PRECISION" in f32|bf16) ;; *) echo "compare_peers.sh: --precision is f32 or bf16" >&2; exit 2 ;; esac
PY=.venv/bin/python
[ -x build/lathe-bench ] || { echo "compare_peers.sh: build first (./run.sh or scripts/setup.sh)" >&2; exit 2; }
if ! $PY -c "import openvino" 2>/dev/null; then
  echo "[compare_peers] installing openvino into .venv" >&2
  .venv/bin/pip install -q openvino >&2
fi
MODELS="resnet18 resnet50 resnext50_32x4d alexnet mobilenet_v2 mnasnet1_0 squeezenet1_1 vgg16 bert vit"
[ -n "$ONLY" ] && MODELS="$ONLY"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# cell N of the row naming model M in a markdown table on stdin
cell() { awk -F'|' -v m="$1" -v n="$2" '$2 ~ "^ *"m {gsub(/^ +| +$/,"",$n); print $n; exit}'; }

echo "Lathe $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads, median of $REPEAT, precision $PRECISION, $(date -u +%Y-%m-%d)"
echo
echo "| model | batch | lathe eager | lazy | compile | compile (interpreter) | first compile s | torch eager | torch.compile | onnxruntime | openvino | best peer | best peer / compile |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"
for b in $BATCHES; do
  for m in $MODELS; do
    echo "[compare_peers] $m batch $b: lathe" >&2
    build/lathe-bench --performance --inference --only "$m" --trace-on-lazy \
      --backend eager,lazy,compile,compile@interpreter --batch-size "$b" --repeat "$REPEAT" \
      --threads "$THREADS" --blocked --precision "$PRECISION" --csv "$TMP/lathe.csv" \
      >/dev/null 2>"$TMP/lathe.err" ||
      { cat "$TMP/lathe.err" >&2; exit 1; }
    read -r le lte lto lti lcs < <(awk -F, 'NR==1 {for (i=1;i<=NF;i++) c[$i]=i}
      NR==2 {print $c["eager_ms"], $c["lazy_ms"], $c["compile_ms"],
             $c["compile@interpreter_ms"], $c["compile_s"]}' "$TMP/lathe.csv")
    echo "[compare_peers] $m batch $b: torch" >&2
    torch_flags=(--only "$m" --batch-size "$b" --repeat "$REPEAT" --threads "$THREADS" --channels-last)
    [ "$TORCH_COMPILE" = 1 ] && torch_flags+=(--compile --freezing)
    [ "$PRECISION" = bf16 ] && torch_flags+=(--autocast)
    ov_precision=f32
    [ "$PRECISION" = bf16 ] && ov_precision=default
    $PY bench/peer_torch.py "${torch_flags[@]}" >"$TMP/torch.md" 2>>"$TMP/peers.err" || true
    te=$(cell "$m" 4 <"$TMP/torch.md"); tc="-"
    [ "$TORCH_COMPILE" = 1 ] && tc=$(cell "$m" 5 <"$TMP/torch.md")
    echo "[compare_peers] $m batch $b: onnxruntime" >&2
    ort=$($PY bench/peer_onnxruntime.py --only "$m" --batch-size "$b" --repeat "$REPEAT" \
          --threads "$THREADS" 2>>"$TMP/peers.err" | cell "$m" 4)
    echo "[compare_peers] $m batch $b: openvino" >&2
    ov=$($PY bench/peer_openvino.py --only "$m" --batch-size "$b" --repeat "$REPEAT" \
         --threads "$THREADS" --precision "$ov_precision" 2>>"$TMP/peers.err" | cell "$m" 4)
    grep -h "^\[peer_openvino\] $m:" "$TMP/peers.err" | tail -1 >&2 || true
    best=$(printf '%s\n' "torch_eager=$te" "torch.compile=$tc" "onnxruntime=$ort" "openvino=$ov" |
           awk -F= '$2 ~ /^[0-9.]+$/ && (best == "" || $2 + 0 < v) {best = $1; v = $2 + 0}
                    END {if (best == "") print "- -"; else print best, v}')
    read -r bname bms <<<"$best"
    ratio=$(awk -v p="$bms" -v l="$lto" 'BEGIN {if (p + 0 > 0 && l + 0 > 0) printf "%.2f", p / l; else print "-"}')
    printf '| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s | %s | %s | %s | %s |\n' \
      "$m" "$b" "$le" "$lte" "$lto" "$lti" "$lcs" "$te" "$tc" "$ort" "$ov" "$bname" "$ratio"
  done
done
