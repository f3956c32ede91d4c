"""lathe.nn modules, state_dict with PyTorch's names, safetensors, the model zoo."""
import pytest
import torch
from safetensors.torch import save_file

import lathe
import ref_models


def _state_to_lathe(module):
    return {k: lathe.from_dlpack(v) for k, v in module.state_dict().items()}


def test_linear_loads_torch_state_dict_and_matches():
    ref = torch.nn.Linear(5, 3)
    m = lathe.nn.Linear(5, 3)
    assert set(m.state_dict()) == {"weight", "bias"}
    m.load_state_dict(_state_to_lathe(ref))
    x = torch.randn(4, 5)
    torch.testing.assert_close(torch.from_dlpack(m(lathe.from_dlpack(x))), ref(x).detach())
    assert torch.equal(torch.from_dlpack(m.weight), ref.weight.detach())


def test_load_state_dict_errors_name_the_keys():
    m = lathe.nn.Sequential(lathe.nn.Linear(2, 2), lathe.nn.ReLU())
    with pytest.raises(lathe.Error, match="0.weight"):
        m.load_state_dict({"0.bias": lathe.zeros([2])})
    assert len(m) == 2 and m[1].type_name == "ReLU"


def test_sequential_cnn_layers_match_torch():
    ref = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                              torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten()).eval()
    with torch.no_grad():
        ref[1].running_mean.uniform_(-1, 1)
        ref[1].running_var.uniform_(0.5, 2)
    m = lathe.nn.Sequential(lathe.nn.Conv2d(3, 8, 3, padding=1), lathe.nn.BatchNorm2d(8),
                            lathe.nn.ReLU(), lathe.nn.AdaptiveAvgPool2d([1, 1]),
                            lathe.nn.Flatten()).eval()
    m.load_state_dict(_state_to_lathe(ref))
    x = torch.randn(2, 3, 10, 10)
    torch.testing.assert_close(torch.from_dlpack(m(lathe.from_dlpack(x))), ref(x).detach(),
                               rtol=1e-4, atol=1e-5)
    assert not m.training


def test_safetensors_load(tmp_path):
    tensors = {"a": torch.randn(3, 4), "b": torch.arange(6).reshape(2, 3)}
    path = str(tmp_path / "t.safetensors")
    save_file(tensors, path)
    loaded = lathe.io.load_safetensors(path)
    assert sorted(loaded) == ["a", "b"]
    for k, v in tensors.items():
        assert torch.equal(torch.from_dlpack(loaded[k]), v)
    with pytest.raises(lathe.Error, match="safetensors"):
        lathe.io.load_safetensors(str(tmp_path / "missing.safetensors"))


def test_model_zoo_resnet18_matches_reference():
    assert "resnet18" in lathe.models.model_names()
    m = lathe.models.create_model("resnet18", seed=0).eval()
    ref = ref_models.build("resnet18").eval()
    ref.load_state_dict({k: torch.from_dlpack(v) for k, v in m.state_dict().items()})
    x = torch.randn(1, 3, 64, 64)
    got = torch.from_dlpack(m(lathe.from_dlpack(x)))
    want = ref(x).detach()
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3 * min(1.0, want.abs().max().item()))
    with pytest.raises(lathe.Error, match="resnet18"):
        lathe.models.create_model("resnet19")
