#!/usr/bin/env bash
# The main job: builds Lathe and prints the speedup table of the model zoo at batch 1 in the three
# modes: eager, lazy ("trace every time", the lazy device) and compile ("trace once",
# lathe::compile), model and inputs on the lazy device. Extra arguments go to lathe-bench
# (e.g. ./run.sh --only resnet18 --repeat 10).
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh build
exec build/lathe-bench --performance --inference --trace-on-lazy --batch-size 1 "$@"
