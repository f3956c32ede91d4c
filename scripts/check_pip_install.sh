#!/usr/bin/env bash
# The issue-14 acceptance check: in a fresh venv, `pip install .` builds Lathe and its Python
# extension, then a resnet18 compiled with torch.compile(backend="lathe") (torchvision's when it
# installs, else the reference model of tests/oracle, the same architecture) matches eager.
# Usage: scripts/check_pip_install.sh [venv-dir]   (default: a new temporary directory)
# With ccache installed it compiles through ccache (CCACHE_BASEDIR = the checkout, the compiler c++
# as for build/), so after a build in build/ the install mostly links cached objects.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
VENV="${1:-$(mktemp -d)/venv}"
PYTHON="${PYTHON:-python3}"
start=$(date +%s)

echo "[pip-check] fresh venv in $VENV" >&2
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q torch==2.13.0 numpy
# torchvision without its dependencies, so it cannot replace the CPU torch; optional (PyPI's
# wheels do not load against the local 2.13.0+cpu torch: "operator torchvision::nms does not
# exist", so the reference resnet18 is used then).
if "$VENV/bin/pip" install -q --no-deps "torchvision==0.28.*" >/dev/null 2>&1; then
  echo "[pip-check] torchvision installed" >&2
fi

if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
  # ccache keys on the compiler's name too: use the one a plain CMake configure of build/ picks
  # (scikit-build-core would otherwise take Python's g++), so build-pip/ reuses build/'s objects.
  export CXX="${CXX:-c++}"
fi
t0=$(date +%s)
"$VENV/bin/pip" install -q . 2>&1 | tail -20
t1=$(date +%s)
echo "[pip-check] pip install . took $((t1 - t0)) s" >&2

# Outside the checkout, so `import lathe` is the installed package, not python/lathe.
cd "$(mktemp -d)"
LATHE_REF_MODELS="$ROOT/tests/oracle" "$VENV/bin/python" - <<'PY'
import os, sys
import torch
import lathe

try:
    import torchvision
    model = torchvision.models.resnet18().eval()
    which = "torchvision"
except Exception:  # torchvision missing or not matching this torch
    sys.path.insert(0, os.environ["LATHE_REF_MODELS"])
    import ref_models
    model = ref_models.build("resnet18").eval()
    which = "tests/oracle/ref_models"
# Registered through the torch_dynamo_backends entry point: lathe.torch is not imported here.
assert "lathe" in torch._dynamo.list_backends(), torch._dynamo.list_backends()
x = torch.randn(1, 3, 224, 224)
with torch.no_grad():
    want = model(x)
    got = torch.compile(model, backend="lathe")(x)
    got = torch.compile(model, backend="lathe")(x)
scale = want.abs().max().item()
torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3 * min(1.0, scale))
print(f"[pip-check] OK: lathe {lathe.__version__} from {os.path.dirname(lathe.__file__)}; "
      f"resnet18 ({which}) with backend='lathe' matches eager "
      f"(max abs diff {(got - want).abs().max().item():.2e})")
PY
echo "[pip-check] total $(( $(date +%s) - start )) s" >&2
