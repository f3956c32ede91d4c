"""Checks that the plain-torch reference models match their originals' published facts:
parameter counts, state_dict names, shapes and dtypes, and output shapes."""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_models as R  # noqa: E402

# Parameter counts of torchvision / transformers / timm models with their default heads.
PARAM_COUNTS = {
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "resnext50_32x4d": 25_028_904,
    "alexnet": 61_100_840,
    "vgg16": 138_357_544,
    "mobilenet_v2": 3_504_872,
    "mnasnet1_0": 4_383_312,
    "squeezenet1_1": 1_235_496,
    "bert": 109_482_240,  # bert-base-uncased BertModel, pooler included
    "vit_base_patch16_224": 86_567_656,
    "vit_small_patch16_224": 22_050_664,
}

# Number of state_dict entries of the originals (BatchNorm contributes 5 each).
STATE_DICT_SIZES = {
    "resnet18": 122,
    "resnet50": 320,
    "alexnet": 16,
    "vgg16": 32,
    "squeezenet1_1": 52,
    "bert": 199,
    "vit_base_patch16_224": 152,
}

KEY_SHAPES = {
    "resnet18": {
        "conv1.weight": (64, 3, 7, 7),
        "layer2.0.downsample.0.weight": (128, 64, 1, 1),
        "layer2.0.downsample.1.running_var": (128,),
        "layer4.1.bn2.num_batches_tracked": (),
        "fc.weight": (1000, 512),
    },
    "resnet50": {
        "layer1.0.downsample.0.weight": (256, 64, 1, 1),
        "layer3.5.conv2.weight": (256, 256, 3, 3),
        "layer4.2.conv3.weight": (2048, 512, 1, 1),
        "fc.weight": (1000, 2048),
    },
    "resnext50_32x4d": {
        "layer1.0.conv1.weight": (128, 64, 1, 1),
        "layer1.0.conv2.weight": (128, 4, 3, 3),
        "layer4.0.conv2.weight": (1024, 32, 3, 3),
        "layer4.2.conv3.weight": (2048, 1024, 1, 1),
    },
    "alexnet": {
        "features.0.weight": (64, 3, 11, 11),
        "features.10.bias": (256,),
        "classifier.1.weight": (4096, 9216),
        "classifier.6.weight": (1000, 4096),
    },
    "vgg16": {
        "features.0.weight": (64, 3, 3, 3),
        "features.28.weight": (512, 512, 3, 3),
        "classifier.0.weight": (4096, 25088),
        "classifier.6.bias": (1000,),
    },
    "mobilenet_v2": {
        "features.0.0.weight": (32, 3, 3, 3),
        "features.0.1.running_mean": (32,),
        "features.1.conv.0.0.weight": (32, 1, 3, 3),
        "features.1.conv.1.weight": (16, 32, 1, 1),
        "features.1.conv.2.weight": (16,),
        "features.2.conv.0.0.weight": (96, 16, 1, 1),
        "features.2.conv.3.bias": (24,),
        "features.17.conv.2.weight": (320, 960, 1, 1),
        "features.18.0.weight": (1280, 320, 1, 1),
        "classifier.1.weight": (1000, 1280),
    },
    "mnasnet1_0": {
        "layers.0.weight": (32, 3, 3, 3),
        "layers.3.weight": (32, 1, 3, 3),
        "layers.6.weight": (16, 32, 1, 1),
        "layers.8.0.layers.0.weight": (48, 16, 1, 1),
        "layers.9.0.layers.3.weight": (72, 1, 5, 5),
        "layers.13.0.layers.6.weight": (320, 1152, 1, 1),
        "layers.14.weight": (1280, 320, 1, 1),
        "layers.15.running_var": (1280,),
        "classifier.1.weight": (1000, 1280),
    },
    "squeezenet1_1": {
        "features.0.weight": (64, 3, 3, 3),
        "features.3.squeeze.weight": (16, 64, 1, 1),
        "features.3.expand3x3.weight": (64, 16, 3, 3),
        "features.12.expand1x1.bias": (256,),
        "classifier.1.weight": (1000, 512, 1, 1),
    },
    "bert": {
        "embeddings.word_embeddings.weight": (30522, 768),
        "embeddings.position_embeddings.weight": (512, 768),
        "embeddings.token_type_embeddings.weight": (2, 768),
        "embeddings.LayerNorm.weight": (768,),
        "encoder.layer.0.attention.self.query.weight": (768, 768),
        "encoder.layer.11.attention.output.LayerNorm.bias": (768,),
        "encoder.layer.3.intermediate.dense.weight": (3072, 768),
        "encoder.layer.3.output.dense.weight": (768, 3072),
        "encoder.layer.3.output.LayerNorm.weight": (768,),
        "pooler.dense.weight": (768, 768),
    },
    "vit_base_patch16_224": {
        "cls_token": (1, 1, 768),
        "pos_embed": (1, 197, 768),
        "patch_embed.proj.weight": (768, 3, 16, 16),
        "blocks.0.norm1.weight": (768,),
        "blocks.11.attn.qkv.weight": (2304, 768),
        "blocks.11.attn.qkv.bias": (2304,),
        "blocks.5.attn.proj.weight": (768, 768),
        "blocks.5.mlp.fc1.weight": (3072, 768),
        "blocks.5.mlp.fc2.bias": (768,),
        "norm.bias": (768,),
        "head.weight": (1000, 768),
    },
    "vit_small_patch16_224": {
        "pos_embed": (1, 197, 384),
        "blocks.11.attn.qkv.weight": (1152, 384),
        "head.weight": (1000, 384),
    },
}


def _meta(name, **cfg):
    # The meta device gives names and shapes without allocating 500 MB for vgg16.
    with torch.device("meta"):
        return R.build(name, **cfg)


@pytest.mark.parametrize("name", sorted(PARAM_COUNTS))
def test_parameter_count_matches_original(name):
    model = _meta(name)
    assert sum(p.numel() for p in model.parameters()) == PARAM_COUNTS[name]


@pytest.mark.parametrize("name", sorted(STATE_DICT_SIZES))
def test_state_dict_size_matches_original(name):
    assert len(_meta(name).state_dict()) == STATE_DICT_SIZES[name]


@pytest.mark.parametrize("name", sorted(KEY_SHAPES))
def test_key_names_and_shapes(name):
    sd = _meta(name).state_dict()
    for key, shape in KEY_SHAPES[name].items():
        assert key in sd, key
        assert tuple(sd[key].shape) == shape, key


@pytest.mark.parametrize("name", R.MODEL_NAMES)
def test_dtypes(name):
    for key, t in _meta(name).state_dict().items():
        want = torch.int64 if key.endswith("num_batches_tracked") else torch.float32
        assert t.dtype == want, key


def test_bert_position_and_token_type_ids_are_not_persistent():
    model = _meta("bert")
    sd = model.state_dict()
    assert "embeddings.position_ids" not in sd
    assert "embeddings.token_type_ids" not in sd
    buffers = dict(model.named_buffers())
    assert buffers["embeddings.position_ids"].shape == (1, 512)
    assert buffers["embeddings.position_ids"].dtype == torch.int64


def test_mnasnet_uses_tensorflow_batchnorm_momentum():
    bn = _meta("mnasnet1_0").layers[1]
    assert bn.momentum == pytest.approx(3e-4)


def test_mobilenet_residual_only_where_shapes_allow():
    model = _meta("mobilenet_v2")
    residual = [i for i, f in enumerate(model.features) if getattr(f, "use_res_connect", False)]
    assert residual == [3, 5, 6, 8, 9, 10, 12, 13, 15, 16]


@pytest.mark.parametrize("name", R.CNN_NAMES)
def test_cnn_forward_shape_at_64(name):
    torch.manual_seed(0)
    model = R.build(name).eval()
    (x,) = R.default_input(name, batch=1, seed=1, image_size=64)
    with torch.inference_mode():
        y = model(x)
    assert y.shape == (1, 1000)
    assert torch.isfinite(y).all()
    assert y.std() > 0


def test_cnn_default_input_is_224_images():
    (x,) = R.default_input("resnet18", batch=2, seed=3)
    assert x.shape == (2, 3, 224, 224) and x.dtype == torch.float32
    assert torch.equal(x, R.default_input("resnet18", batch=2, seed=3)[0])


SMALL_BERT = dict(vocab_size=1000, hidden=64, layers=2, heads=4, intermediate=128,
                  max_position=128)


def test_bert_small_forward_and_mask():
    torch.manual_seed(0)
    model = R.build("bert", **SMALL_BERT).eval()
    ids, mask = R.default_input("bert", batch=2, seed=0, seq_len=16, **SMALL_BERT)
    assert ids.dtype == torch.int64 and mask.dtype == torch.int64
    assert ids.min() >= 0 and ids.max() < 1000 and bool((mask == 1).all())
    with torch.inference_mode():
        hidden, pooled = model(ids, mask)
        assert hidden.shape == (2, 16, 64) and pooled.shape == (2, 64)
        # Masked keys must not influence the unmasked positions.
        mask2 = mask.clone()
        mask2[1, -3:] = 0
        ids2 = ids.clone()
        ids2[1, -3:] = (ids2[1, -3:] + 7) % 1000
        h_a, _ = model(ids, mask2)
        h_b, _ = model(ids2, mask2)
    torch.testing.assert_close(h_a[1, :-3], h_b[1, :-3])
    assert not torch.allclose(h_a[1, :-3], hidden[1, :-3])


def test_bert_default_input_shape():
    ids, mask = R.default_input("bert", batch=2, seed=0)
    assert ids.shape == (2, 128) and mask.shape == (2, 128)
    assert ids.max() < 30522


def test_vit_small_config_forward():
    torch.manual_seed(0)
    cfg = dict(img_size=32, patch=8, depth=2, dim=64, heads=4, classes=10)
    model = R.build("vit", **cfg).eval()
    assert model.pos_embed.shape == (1, 17, 64)
    (x,) = R.default_input("vit", batch=2, seed=0, **cfg)
    assert x.shape == (2, 3, 32, 32)
    with torch.inference_mode():
        y = model(x)
    assert y.shape == (2, 10) and torch.isfinite(y).all()


def test_vit_alias_names_select_variant():
    assert _meta("vit").pos_embed.shape == (1, 197, 768)
    assert _meta("vit", variant="vit_small_patch16_224").pos_embed.shape == (1, 197, 384)
    with pytest.raises(ValueError, match="unknown vit variant"):
        R.build("vit", variant="vit_huge")


def test_unknown_model_is_an_error():
    with pytest.raises(ValueError, match=r"\[ref_models\] unknown model"):
        R.build("resnet19")


def test_gen_models_writes_reloadable_deterministic_data(tmp_path):
    import json

    from safetensors import safe_open
    from safetensors.torch import load_file

    import gen_models as G

    for run in ("a", "b"):
        for name in ("resnet18", "bert"):
            G.generate(name, str(tmp_path / run), small=True)
    for name in ("resnet18", "bert"):
        io = load_file(str(tmp_path / "a" / f"{name}.io.safetensors"))
        weights = load_file(str(tmp_path / "a" / f"{name}.weights.safetensors"))
        again = load_file(str(tmp_path / "b" / f"{name}.io.safetensors"))
        assert io.keys() == again.keys() and all(torch.equal(io[k], again[k]) for k in io)
        with safe_open(str(tmp_path / "a" / f"{name}.io.safetensors"), "pt") as f:
            cfg = json.loads(f.metadata()["config"])
        model = R.build(name, **cfg).eval()
        model.load_state_dict(weights, strict=True)
        inputs = [io[k] for k in sorted(io) if k.startswith("input.")]
        with torch.no_grad():
            outs = model(*inputs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        for i, out in enumerate(outs):
            torch.testing.assert_close(out, io[f"output.{i}"], rtol=0, atol=0)

    io = load_file(str(tmp_path / "a" / "resnet18.io.safetensors"))
    weights = load_file(str(tmp_path / "a" / "resnet18.weights.safetensors"))
    assert io["input.0"].shape == (2, 3, 64, 64)
    # BatchNorm is not at its defaults, and the train-mode forward moved its statistics.
    assert not torch.equal(weights["bn1.running_var"], torch.ones(64))
    assert not torch.allclose(io["train_output.0"], io["output.0"])
    buffers = [k for k in weights if "running" in k or "num_batches" in k]
    assert sorted(k for k in io if k.startswith("train_state.")) == sorted(
        "train_state." + k for k in buffers)
    assert io["train_state.bn1.num_batches_tracked"].item() == 1
    assert not torch.equal(io["train_state.bn1.running_mean"], weights["bn1.running_mean"])

    bert = load_file(str(tmp_path / "a" / "bert.io.safetensors"))
    assert bert["input.1"][1, -3:].eq(0).all() and bert["input.1"][0].eq(1).all()
    assert "train_output.0" not in bert
