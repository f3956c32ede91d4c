"""Generates the gradient oracle: PyTorch's gradients for op cases and for zoo models.

    python tests/oracle/gen_grads.py --out DIR [--models NAME ...]

DIR/op_grads.safetensors, for each case NAME of OP_CASES (f32): NAME.in.<i> the inputs (those
that get a gradient first, then integer ones), NAME.v the upstream gradient, NAME.grad.<i> torch's
gradient of sum(out * v) for each floating input.
DIR/<model>.grads.safetensors, for each model (f64, small configs of gen_models.py): the
state_dict as weight.<name>, input.<i>, v.<i>, and grad.<param> of sum_i(out_i * v_i) with the
CNNs in train mode (BatchNorm batch statistics) and bert / vit in eval mode.
The C++ side is tests/autograd/test_grads_oracle.cpp (same case names).
"""

from __future__ import annotations

import argparse
import os
import sys
import zlib

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_models as G  # noqa: E402
import ref_models as R  # noqa: E402


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def r(*shape):
    return torch.randn(*shape)


# name -> (inputs factory, function of the inputs). Floating inputs get gradients.
OP_CASES = {
    "conv2d_groups_dilation": (lambda: [r(2, 4, 7, 7), r(6, 2, 3, 3), r(6)],
                               lambda x, w, b: F.conv2d(x, w, b, 2, 2, 2, 2)),
    "conv2d_depthwise": (lambda: [r(2, 3, 6, 6), r(3, 1, 3, 3)],
                         lambda x, w: F.conv2d(x, w, None, 1, 1, 1, 3)),
    "linear": (lambda: [r(2, 3, 5), r(4, 5), r(4)], F.linear),
    "matmul_broadcast": (lambda: [r(2, 1, 3, 4), r(3, 4, 5)], torch.matmul),
    "bmm": (lambda: [r(3, 2, 4), r(3, 4, 5)], torch.bmm),
    "batch_norm_train": (lambda: [r(4, 3, 3, 3), r(3), r(3)],
                         lambda x, w, b: F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5)),
    "batch_norm_eval": (lambda: [r(2, 3, 3, 3), r(3), r(3)],
                        lambda x, w, b: F.batch_norm(x, torch.linspace(-0.5, 0.5, 3),
                                                     torch.linspace(0.5, 2.0, 3), w, b, False,
                                                     0.1, 1e-5)),
    "layer_norm": (lambda: [r(2, 3, 8), r(8), r(8)],
                   lambda x, w, b: F.layer_norm(x, (8,), w, b, 1e-5)),
    "softmax": (lambda: [r(3, 7)], lambda x: F.softmax(x, -1)),
    "log_softmax": (lambda: [r(3, 7)], lambda x: F.log_softmax(x, 0)),
    "gelu": (lambda: [r(4, 5) * 3], F.gelu),
    "gelu_tanh": (lambda: [r(4, 5) * 3], lambda x: F.gelu(x, approximate="tanh")),
    "relu6": (lambda: [r(4, 5) * 5], F.relu6),
    "hardtanh": (lambda: [r(4, 5) * 2], lambda x: F.hardtanh(x, -1.5, 0.5)),
    "hardswish": (lambda: [r(4, 5) * 4], F.hardswish),
    "max_pool2d": (lambda: [r(2, 3, 7, 7)], lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True)),
    "avg_pool2d": (lambda: [r(2, 3, 7, 7)],
                   lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)),
    "adaptive_avg_pool2d": (lambda: [r(2, 3, 7, 5)], lambda x: F.adaptive_avg_pool2d(x, (3, 2))),
    "embedding": (lambda: [r(10, 4), torch.tensor([[1, 3, 1], [9, 0, 3]])],
                  lambda w, i: F.embedding(i, w)),
    "cross_entropy": (lambda: [r(5, 6), torch.tensor([1, 0, 5, -100, 2])],
                      lambda x, t: F.cross_entropy(x, t)),
    "nll_loss_sum": (lambda: [r(5, 6), torch.tensor([1, 0, 5, 3, 2])],
                     lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, reduction="sum")),
    "cat_permute_reshape": (lambda: [r(2, 3, 4), r(2, 1, 4)],
                            lambda a, b: torch.cat([a, b], 1).permute(2, 0, 1).reshape(4, -1)),
    "expand_mul_div": (lambda: [r(3, 1), r(1, 4), r(3, 4).abs() + 0.5],
                       lambda a, b, c: (a.expand(3, 4) * b) / c),
    "reductions": (lambda: [r(3, 4, 5)],
                   lambda x: x.sum(1) + x.mean(1) + x.amax(1) + x.var(1) + x.std(1)),
    "sdpa": (lambda: [r(2, 2, 4, 8), r(2, 2, 6, 8), r(2, 2, 6, 8)],
             F.scaled_dot_product_attention),
    "slice_select": (lambda: [r(4, 6)], lambda x: x[1:4:2, :].sum(0) + x.select(0, -1)),
}

MODELS = ("resnet18", "mobilenet_v2", "squeezenet1_1", "vit", "bert")


def op_grads(out_dir: str) -> None:
    out = {}
    for name, (make, fn) in OP_CASES.items():
        torch.manual_seed(seed_of(name))
        inputs = make()
        for x in inputs:
            if x.is_floating_point():
                x.requires_grad_(True)
        y = fn(*inputs)
        v = torch.randn(y.shape)
        (y * v).sum().backward()
        for i, x in enumerate(inputs):
            out[f"{name}.in.{i}"] = x.detach().contiguous()
            if x.is_floating_point():
                out[f"{name}.grad.{i}"] = x.grad.contiguous()
        out[f"{name}.v"] = v
    save_file(out, os.path.join(out_dir, "op_grads.safetensors"))


def model_grads(name: str, out_dir: str) -> None:
    cfg, input_args = G.plan(name, True)
    torch.manual_seed(0)
    model = R.build(name, **cfg)
    inputs = G.make_inputs(name, cfg, input_args)
    calibration = R.default_input(name, batch=G.BATCH, seed=G.name_seed(name) + 2, **input_args,
                                  **cfg)
    G.randomize_batchnorm(model, calibration, G.name_seed(name) + 1)
    model = model.double()
    inputs = tuple(t.double() if t.is_floating_point() else t for t in inputs)
    out = {f"weight.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    if name in R.CNN_NAMES:
        model.train()
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.eval()
    else:
        model.eval()
    outputs = G.as_tuple(model(*inputs))
    g = torch.Generator().manual_seed(seed_of(name))
    loss = 0
    for i, o in enumerate(outputs):
        v = torch.randn(o.shape, dtype=o.dtype, generator=g)
        out[f"v.{i}"] = v
        loss = loss + (o * v).sum()
    loss.backward()
    for i, t in enumerate(inputs):
        out[f"input.{i}"] = t.contiguous()
    for k, p in model.named_parameters():
        out[f"grad.{k}"] = p.grad.contiguous()
    meta = {"config": G.json.dumps(cfg, sort_keys=True)}
    save_file(out, os.path.join(out_dir, f"{name}.grads.safetensors"), metadata=meta)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", nargs="*", default=None)
    ap.add_argument("--ops", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.ops:
        op_grads(args.out)
    for name in args.models or []:
        model_grads(name, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
