"""torchvision's models through torch.compile(backend="lathe") against eager PyTorch (eval mode,
random weights, 224x224 images, batch 1 and 2).

Opt-in: collected only when LATHE_PY_TORCHVISION is set ("1" or "all": the nine torchvision models
of the benchmark set; or a comma list such as "resnet18,alexnet"), because torchvision does not
import beside the CI venv's torch 2.13.0. When it is set, a torchvision that does not import is an
error, not a skip. See README.md ("Python") for the venv that has the matching pair."""
import os

import pytest
import torch
import torchvision  # an ImportError fails the run: the caller asked for these tests

import lathe.torch  # noqa: F401  (registers backend="lathe" in a build-tree checkout)

# The benchmark set's models that torchvision has (BERT is not a torchvision model; ViT is
# torchvision's vit_b_16).
TORCHVISION_MODELS = ("resnet18", "resnet50", "resnext50_32x4d", "alexnet", "mobilenet_v2",
                      "mnasnet1_0", "squeezenet1_1", "vgg16", "vit_b_16")


def selected_models():
    want = os.environ.get("LATHE_PY_TORCHVISION", "")
    if want in ("1", "all"):
        return TORCHVISION_MODELS
    names = tuple(n for n in want.split(",") if n)
    unknown = [n for n in names if n not in TORCHVISION_MODELS]
    if unknown:
        raise ValueError(f"LATHE_PY_TORCHVISION names unknown models {unknown}; "
                         f"choose from {TORCHVISION_MODELS}")
    return names


def assert_close_harness(out, ref, tol=1e-3):
    """lathe-bench's accuracy rule: allclose with rtol = tol and atol = tol * min(1, max|ref|)."""
    scale = ref.abs().max().item()
    torch.testing.assert_close(out, ref, rtol=tol, atol=tol * min(1.0, scale))


@pytest.mark.parametrize("name", selected_models())
def test_torchvision_model_matches_eager(name):
    model = getattr(torchvision.models, name)(weights=None).eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="lathe")
    with torch.no_grad():
        for batch in (1, 2):
            x = torch.randn(batch, 3, 224, 224)
            want = model(x)
            assert_close_harness(compiled(x), want)
            assert_close_harness(compiled(x), want)  # served by the compiled graph
