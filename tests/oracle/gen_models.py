"""Generates oracle data for the benchmark models: weights, inputs and PyTorch outputs.

For each model NAME it writes into --out:
  NAME.weights.safetensors  the state_dict (names as in torchvision / transformers / timm)
  NAME.io.safetensors       input.<i>, eval-mode output.<i>, and for the CNNs
                            train_output.<i> and train_state.<buffer> (see below)

Everything is deterministic and keyed by the model name: the model is built after
torch.manual_seed(0); its BatchNorm running statistics are then set from one calibration
batch (another seed) and perturbed, and its BatchNorm affine parameters redrawn, from a
generator seeded by the name (so a test never passes on default statistics and
activations keep a trained model's scale); inputs come from default_input with the
name-derived seed.
Batch is 2.

Train mode: one forward of model.train() on the same input from the same starting
weights, with Dropout kept inactive (its random mask cannot be reproduced elsewhere),
so train_output differs from output only through BatchNorm using batch statistics.
train_state.<buffer> holds every state_dict buffer after that forward (BatchNorm
running_mean, running_var, num_batches_tracked).

The io file's metadata records the model name, its build config (JSON), the input
size and whether --small was used. --small keeps the CNNs' architecture but feeds
64x64 images, and builds small bert / vit configs. Bert's attention mask always masks
the second sample's last 3 tokens, so padding is exercised.

    python tests/oracle/gen_models.py --out DIR [--only NAME] [--small]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib

import torch
from safetensors.torch import save_file
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_models as R  # noqa: E402

BATCH = 2
SMALL_IMAGE = 64
SMALL_BERT = dict(vocab_size=1000, hidden=64, layers=2, heads=4, intermediate=128,
                  max_position=128)
SMALL_BERT_SEQ = 16
SMALL_VIT = dict(img_size=32, patch=8, depth=2, dim=64, heads=4, classes=10)
BERT_MASKED_TAIL = 3  # the second sample's last tokens are padding


def name_seed(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def plan(name: str, small: bool) -> tuple[dict, dict]:
    """Returns (build config, extra default_input arguments) for one model."""
    if name == "bert":
        return (dict(SMALL_BERT), {"seq_len": SMALL_BERT_SEQ}) if small else ({}, {"seq_len": 128})
    if name == "vit":
        return (dict(SMALL_VIT), {}) if small else ({}, {})
    return {}, ({"image_size": SMALL_IMAGE} if small else {})


def randomize_batchnorm(model: nn.Module, calibration: tuple[torch.Tensor, ...],
                        seed: int) -> None:
    """Sets BatchNorm statistics to those of one calibration batch, then perturbs them and
    draws random affine parameters: activations stay in a realistic range (as with trained
    weights) while no statistic is at its default."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    momenta = [m.momentum for m in bns]
    for m in bns:
        m.momentum = 1.0
    model.train()
    with torch.no_grad():
        model(*calibration)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m, momentum in zip(bns, momenta):
            n = m.num_features
            m.momentum = momentum
            m.num_batches_tracked.zero_()
            m.weight.copy_(torch.rand(n, generator=g) * 0.8 + 0.4)
            m.bias.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_mean.add_(torch.randn(n, generator=g) * 0.1 * m.running_var.sqrt())
            m.running_var.mul_(torch.rand(n, generator=g) * 0.6 + 0.7).clamp_(min=1e-3)


def make_inputs(name: str, cfg: dict, input_args: dict) -> tuple[torch.Tensor, ...]:
    inputs = R.default_input(name, batch=BATCH, seed=name_seed(name), **input_args, **cfg)
    if name == "bert":
        ids, mask = inputs
        mask = mask.clone()
        mask[1, -BERT_MASKED_TAIL:] = 0
        inputs = (ids, mask)
    return inputs


def as_tuple(out) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def generate(name: str, out_dir: str, small: bool) -> dict[str, float]:
    cfg, input_args = plan(name, small)
    torch.manual_seed(0)
    model = R.build(name, **cfg)
    inputs = make_inputs(name, cfg, input_args)
    calibration = R.default_input(name, batch=BATCH, seed=name_seed(name) + 2, **input_args,
                                  **cfg)
    randomize_batchnorm(model, calibration, name_seed(name) + 1)
    model.eval()
    weights = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}

    io: dict[str, torch.Tensor] = {f"input.{i}": t.contiguous() for i, t in enumerate(inputs)}
    with torch.no_grad():
        for i, t in enumerate(as_tuple(model(*inputs))):
            io[f"output.{i}"] = t.contiguous()
        if name in R.CNN_NAMES:
            model.train()
            for m in model.modules():
                if isinstance(m, nn.Dropout):
                    m.eval()
            for i, t in enumerate(as_tuple(model(*inputs))):
                io[f"train_output.{i}"] = t.contiguous()
            buffers = dict(model.named_buffers())
            for key in model.state_dict():
                if key in buffers:
                    io[f"train_state.{key}"] = buffers[key].detach().clone().contiguous()

    metadata = {
        "model": name,
        "config": json.dumps(cfg, sort_keys=True),
        "small": str(int(small)),
        "batch": str(BATCH),
        "input_shapes": json.dumps([list(t.shape) for t in inputs]),
        "train_dropout": "inactive",
    }
    os.makedirs(out_dir, exist_ok=True)
    save_file(weights, os.path.join(out_dir, f"{name}.weights.safetensors"), metadata=metadata)
    save_file(io, os.path.join(out_dir, f"{name}.io.safetensors"), metadata=metadata)
    return {"params": sum(p.numel() for p in model.parameters())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "data", "models"))
    p.add_argument("--only", choices=R.MODEL_NAMES, action="append",
                   help="generate only this model (repeatable)")
    p.add_argument("--small", action="store_true", help="small but valid inputs and configs")
    args = p.parse_args(argv)
    torch.use_deterministic_algorithms(True, warn_only=True)
    for name in args.only or R.MODEL_NAMES:
        start = time.perf_counter()
        info = generate(name, args.out, args.small)
        print(f"{name}: {info['params']:,} params, {time.perf_counter() - start:.1f}s -> "
              f"{args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
