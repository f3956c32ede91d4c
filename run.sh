#!/usr/bin/env bash
# The main job: builds Lathe and prints the speedup table of the model zoo at batch 1: eager,
# trace every time (lazy device) and trace once (lathe::compile), model and inputs on the lazy
# device. Extra arguments go to lathe-bench (e.g. ./run.sh --only resnet18 --repeat 10).
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh build
if [ -x build/lathe-bench ]; then
  exec build/lathe-bench --performance --inference --trace-on-lazy --batch-size 1 "$@"
fi
exec build/lathe-demo "$@"
