#!/usr/bin/env bash
# The main job: builds Lathe and runs the eager benchmark over the model zoo at batch 1.
# Extra arguments go to lathe-bench (e.g. ./run.sh --only resnet18 --repeat 10).
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh build
if [ -x build/lathe-bench ]; then
  exec build/lathe-bench --batch-size 1 "$@"
fi
exec build/lathe-demo "$@"
