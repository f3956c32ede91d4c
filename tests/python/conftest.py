"""pytest setup for the Python package tests: `lathe` must import (CI sets PYTHONPATH to the build
tree's python/ folder, or the package is pip-installed). A missing package is an error, never a
skip; so is a missing torch, which the backend tests need."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# The PyTorch reference models (plain torch.nn) live with the oracle tests.
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))

import lathe  # noqa: E402,F401  (an ImportError here fails the whole run)
import torch  # noqa: E402,F401

# Long mode: full-size models and inputs (224x224, bert-base, vit-base); CI runs small ones.
LONG = os.environ.get("LATHE_PY_LONG", "") not in ("", "0")

# torchvision's models (test_torchvision.py) only on request: LATHE_PY_TORCHVISION=1 (or a comma
# list of models). The CI venv's torch 2.13.0 has no torchvision that imports, so the file is not
# collected there at all rather than skipped; when requested, a missing torchvision fails the run.
collect_ignore = [] if os.environ.get("LATHE_PY_TORCHVISION", "") not in ("", "0") else [
    "test_torchvision.py"]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    lathe.manual_seed(0)
