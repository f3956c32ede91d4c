"""Generates the optimizer oracle: torch.optim's parameter trajectories, state and lr schedules.

    python tests/oracle/gen_optim.py --out DIR

writes DIR/optim.safetensors (all f64 but the Adam step counters) holding, for each config CFG
of CONFIGS (two parameters k = 0, 1, STEPS steps s = 0..STEPS-1):
  CFG.p0.<k>            the initial parameters
  CFG.grad.<s>.<k>      the gradient set before step s (random, independent of the parameters)
  CFG.p.<s>.<k>         the parameters after step s
  CFG.state.<k>.<name>  torch's optimizer state after the last step (momentum_buffer, exp_avg,
                        exp_avg_sq, step)
and for each scheduler SCHED of SCHEDULERS, SCHED.lr: the lr after each of EPOCHS epochs.
The metadata key "configs" holds the JSON of CONFIGS and SCHEDULERS. Seeded, deterministic.
The C++ side is tests/optim/test_optim.cpp.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
from safetensors.torch import save_file

STEPS = 5
EPOCHS = 12
CONFIGS = {
    "sgd_plain": {"kind": "sgd", "lr": 0.1},
    "sgd_momentum": {"kind": "sgd", "lr": 0.1, "momentum": 0.9, "dampening": 0.1,
                     "weight_decay": 0.01},
    "sgd_nesterov": {"kind": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True,
                     "weight_decay": 1e-3},
    "adam": {"kind": "adam", "lr": 1e-2},
    "adam_wd": {"kind": "adam", "lr": 1e-2, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6,
                "weight_decay": 0.1},
    "adamw": {"kind": "adamw", "lr": 1e-2, "weight_decay": 0.05},
}
SCHEDULERS = {
    "step_lr": {"kind": "step", "lr": 0.1, "step_size": 3, "gamma": 0.5},
    "cosine": {"kind": "cosine", "lr": 0.1, "t_max": 8, "eta_min": 1e-3},
}


def make_optimizer(cfg: dict, params: list) -> torch.optim.Optimizer:
    if cfg["kind"] == "sgd":
        return torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg.get("momentum", 0),
                               dampening=cfg.get("dampening", 0),
                               weight_decay=cfg.get("weight_decay", 0),
                               nesterov=cfg.get("nesterov", False))
    cls = torch.optim.Adam if cfg["kind"] == "adam" else torch.optim.AdamW
    return cls(params, lr=cfg["lr"], betas=(cfg.get("beta1", 0.9), cfg.get("beta2", 0.999)),
               eps=cfg.get("eps", 1e-8), weight_decay=cfg.get("weight_decay", 0))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out: dict[str, torch.Tensor] = {}
    gen = torch.Generator().manual_seed(1234)
    for name, cfg in CONFIGS.items():
        params = [torch.randn(3, 4, dtype=torch.float64, generator=gen),
                  torch.randn(5, dtype=torch.float64, generator=gen)]
        for k, p in enumerate(params):
            out[f"{name}.p0.{k}"] = p.clone()
            p.requires_grad_(True)
        opt = make_optimizer(cfg, params)
        for s in range(STEPS):
            for k, p in enumerate(params):
                p.grad = torch.randn(p.shape, dtype=torch.float64, generator=gen)
                out[f"{name}.grad.{s}.{k}"] = p.grad.clone()
            opt.step()
            for k, p in enumerate(params):
                out[f"{name}.p.{s}.{k}"] = p.detach().clone()
        for k, st in opt.state_dict()["state"].items():
            for key, value in st.items():
                out[f"{name}.state.{k}.{key}"] = value.detach().clone().contiguous()
    for name, cfg in SCHEDULERS.items():
        p = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([p], lr=cfg["lr"])
        if cfg["kind"] == "step":
            sched = torch.optim.lr_scheduler.StepLR(opt, cfg["step_size"], cfg["gamma"])
        else:
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg["t_max"], cfg["eta_min"])
        lrs = []
        for _ in range(EPOCHS):
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr()[0])
        out[f"{name}.lr"] = torch.tensor(lrs, dtype=torch.float64)
    os.makedirs(args.out, exist_ok=True)
    meta = {"configs": json.dumps({"optimizers": CONFIGS, "schedulers": SCHEDULERS,
                                   "steps": STEPS, "epochs": EPOCHS})}
    save_file(out, os.path.join(args.out, "optim.safetensors"), metadata=meta)


if __name__ == "__main__":
    main()
