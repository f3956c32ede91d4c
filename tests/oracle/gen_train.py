"""Generates the convergence oracle: 20 training steps of examples/small_cnn.h in PyTorch (f64).

    python tests/oracle/gen_train.py --out DIR

writes DIR/train_small.safetensors: weight.<name> (the initial state_dict), x.<s> / y.<s> the
batch of step s, loss (the loss before each step) and final.<name> (parameters after the last
step). SGD(lr=0.05, momentum=0.9, weight_decay=1e-4), BatchNorm in train mode, cross-entropy.
The C++ side is tests/autograd/test_convergence.cpp.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

STEPS = 20
BATCH = 8


def small_cnn() -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(1, 4, 3, 1, 1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 8, 3, 1, 1), nn.ReLU(), nn.AdaptiveAvgPool2d((1, 1)),
                         nn.Flatten(1), nn.Linear(8, 2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = small_cnn().double()
    out = {f"weight.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(5)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    losses = []
    model.train()
    for s in range(STEPS):
        y = torch.randint(0, 2, (BATCH,), generator=g)
        x = torch.randn(BATCH, 1, 8, 8, dtype=torch.float64, generator=g) * 0.8
        x[:, :, :, :4] += 0.7 * (y == 0).double().view(-1, 1, 1, 1)
        x[:, :, :, 4:] += 0.7 * (y == 1).double().view(-1, 1, 1, 1)
        out[f"x.{s}"] = x
        out[f"y.{s}"] = y
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out["loss"] = torch.tensor(losses, dtype=torch.float64)
    for k, v in model.state_dict().items():
        out[f"final.{k}"] = v.detach().clone().contiguous()
    os.makedirs(args.out, exist_ok=True)
    save_file(out, os.path.join(args.out, "train_small.safetensors"))


if __name__ == "__main__":
    main()
