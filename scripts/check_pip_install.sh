#!/usr/bin/env bash
# The issue-14 acceptance check: in a fresh venv, `pip install .` builds Lathe and its Python
# extension, then a resnet18 compiled with torch.compile(backend="lathe") matches eager.
# Usage: scripts/check_pip_install.sh [--torchvision] [venv-dir]   (default: a new temp directory)
# - default: torch 2.13.0 (the CI venv's, CPU build) and the reference resnet18 of tests/oracle
#   (the same architecture as torchvision's; no torchvision imports beside that torch);
# - --torchvision: the local torch 2.14.1 + torchvision 0.29.1 pair (a CUDA build, 5.5 GB, that runs
#   on the CPU), torchvision's resnet18 (a torchvision that does not import is an error), then
#   tests/python/test_torchvision.py for the models in LATHE_PY_TORCHVISION (default resnet18).
# With ccache installed it compiles through ccache (CCACHE_BASEDIR = the checkout, the compiler c++
# as for build/), so after a build in build/ the install mostly links cached objects.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
TORCHVISION=0
if [ "${1:-}" = "--torchvision" ]; then
  TORCHVISION=1
  shift
fi
VENV="${1:-$(mktemp -d)/venv}"
PYTHON="${PYTHON:-python3}"
start=$(date +%s)

echo "[pip-check] fresh venv in $VENV" >&2
"$PYTHON" -m venv "$VENV"
if [ "$TORCHVISION" = 1 ]; then
  "$VENV/bin/pip" install -q torch==2.14.1 torchvision==0.29.1 numpy pytest
else
  "$VENV/bin/pip" install -q torch==2.13.0 numpy
fi

if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
  # ccache keys on the compiler's name too: use the one a plain CMake configure of build/ picks
  # (scikit-build-core would otherwise take Python's g++), so build-pip/ reuses build/'s objects.
  export CXX="${CXX:-c++}"
fi
# The system CMake: a cmake shim earlier on PATH (pyenv's, for a Python without the cmake package)
# fails inside pip's isolated build and scikit-build-core then reports no CMake at all.
if [ -z "${CMAKE_EXECUTABLE:-}" ] && [ -x /usr/bin/cmake ]; then
  export CMAKE_EXECUTABLE=/usr/bin/cmake
fi
t0=$(date +%s)
"$VENV/bin/pip" install -q . 2>&1 | tail -20
t1=$(date +%s)
echo "[pip-check] pip install . took $((t1 - t0)) s" >&2

# Outside the checkout, so `import lathe` is the installed package, not python/lathe.
cd "$(mktemp -d)"
LATHE_REF_MODELS="$ROOT/tests/oracle" TORCHVISION="$TORCHVISION" "$VENV/bin/python" - <<'PY'
import os, sys
import torch
import lathe

if os.environ["TORCHVISION"] == "1":
    import torchvision  # must import: this mode installed the matching pair
    model = torchvision.models.resnet18(weights=None).eval()
    which = f"torchvision {torchvision.__version__}, torch {torch.__version__}"
else:
    sys.path.insert(0, os.environ["LATHE_REF_MODELS"])
    import ref_models
    model = ref_models.build("resnet18").eval()
    which = f"tests/oracle/ref_models, torch {torch.__version__}"
# Registered through the torch_dynamo_backends entry point: lathe.torch is not imported here.
assert "lathe" in torch._dynamo.list_backends(), torch._dynamo.list_backends()
torch.manual_seed(0)
compiled = torch.compile(model, backend="lathe")
for batch in (1, 2):
    x = torch.randn(batch, 3, 224, 224)
    with torch.no_grad():
        want = model(x)
        got = compiled(x)
        got = compiled(x)
    scale = want.abs().max().item()
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3 * min(1.0, scale))
    print(f"[pip-check] OK: lathe {lathe.__version__} from {os.path.dirname(lathe.__file__)}; "
          f"resnet18 ({which}) batch {batch} with backend='lathe' matches eager "
          f"(max abs diff {(got - want).abs().max().item():.2e})")
PY
if [ "$TORCHVISION" = 1 ]; then
  # Still from outside the checkout: the tests import the installed package.
  LATHE_PY_TORCHVISION="${LATHE_PY_TORCHVISION:-resnet18}" \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/tests/python/test_torchvision.py"
fi
echo "[pip-check] total $(( $(date +%s) - start )) s" >&2
