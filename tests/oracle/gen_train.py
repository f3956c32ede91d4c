"""Generates the convergence oracle: 200 training steps of examples/small_cnn.h in PyTorch (f64).

    python tests/oracle/gen_train.py --out DIR

writes DIR/train_small.safetensors: weight.<name> (the initial state_dict), x.<s> / y.<s> the
batch of step s, loss (the loss before each step), final.<name> (the state_dict after the last
step), and a held-out test set, test_x / test_y, with the trained model's test_logits (eval mode)
and test_accuracy. SGD(lr=0.05, momentum=0.9, weight_decay=1e-4), BatchNorm in train mode,
cross-entropy. The task: 8x8 noise images whose left (class 0) or right (class 1) half is
slightly brighter, faint enough that the final accuracy is not 1. The C++ side is
tests/autograd/test_convergence.cpp (eager and compiled training steps).
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

STEPS = 200
BATCH = 8
TEST = 512
SHIFT = 0.25  # the brightness of the informative half, against noise of std 0.8


def small_cnn() -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(1, 4, 3, 1, 1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 8, 3, 1, 1), nn.ReLU(), nn.AdaptiveAvgPool2d((1, 1)),
                         nn.Flatten(1), nn.Linear(8, 2))


def make_batch(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, 1, 8, 8, dtype=torch.float64, generator=g) * 0.8
    x[:, :, :, :4] += SHIFT * (y == 0).double().view(-1, 1, 1, 1)
    x[:, :, :, 4:] += SHIFT * (y == 1).double().view(-1, 1, 1, 1)
    return x, y


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
        x, y = make_batch(BATCH, g)
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
    test_x, test_y = make_batch(TEST, g)
    model.eval()
    with torch.no_grad():
        logits = model(test_x)
    out["test_x"] = test_x
    out["test_y"] = test_y
    out["test_logits"] = logits
    out["test_accuracy"] = (logits.argmax(1) == test_y).double().mean().reshape(1)
    os.makedirs(args.out, exist_ok=True)
    save_file(out, os.path.join(args.out, "train_small.safetensors"))


if __name__ == "__main__":
    main()
