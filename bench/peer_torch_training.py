"""Peer benchmark for training: PyTorch eager and torch.compile training steps of the Lathe
benchmark models (the plain-torch references in tests/oracle), the same task as
`lathe-bench --training`.

A step is: zero_grad (set_to_none), forward in training mode, the synthetic loss, backward, and
SGD (lr 0.01, momentum 0.9). The synthetic loss matches lathe-bench's: every 2-d output [B, K] is
a class prediction and every 3-d output [B, S, K] a token prediction, with uniformly drawn labels
in [0, K), and the loss is the sum of the cross-entropies (CNNs and vit: one class loss; bert: a
token loss on the last hidden state plus a class loss on the pooled output). Images are
channels-last as in lathe-bench. --warmup untimed steps (after the first, which compiles), then
the median of --repeat timed steps in milliseconds. Prints a markdown table on stdout and one
progress line per model on stderr.

    python bench/peer_torch_training.py [--only NAME] [--batch-size N] [--repeat N]
                                        [--warmup N] [--threads N] [--compile]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from peer_torch import (IMAGE_MODELS, LABELS, R, default_threads, print_header, short_error,
                        table_row)


def synthetic_loss(outputs, labels_cache: list) -> torch.Tensor:
    outs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    if not labels_cache:
        gen = torch.Generator().manual_seed(1234)
        for o in outs:
            k = o.shape[-1]
            labels_cache.append(torch.randint(0, k, (o.numel() // k,), generator=gen))
    loss = None
    for o, y in zip(outs, labels_cache):
        term = F.cross_entropy(o.reshape(-1, o.shape[-1]), y)
        loss = term if loss is None else loss + term
    return loss


def make_step(name: str, batch: int, compiled: bool):
    torch.manual_seed(0)
    model = R.build(name).train()
    inputs = R.default_input(name, batch=batch, seed=0)
    if name in IMAGE_MODELS:
        model = model.to(memory_format=torch.channels_last)
        inputs = tuple(t.contiguous(memory_format=torch.channels_last) for t in inputs)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    forward = torch.compile(model) if compiled else model
    labels: list = []

    def step():
        opt.zero_grad(set_to_none=True)
        loss = synthetic_loss(forward(*inputs), labels)
        loss.backward()
        opt.step()
        return loss

    return step


def time_steps(step, warmup: int, repeat: int) -> tuple[float, float]:
    """(seconds of the first step, median ms of the timed steps)."""
    start = time.perf_counter()
    step()
    first_s = time.perf_counter() - start
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    return first_s, statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="PyTorch training-step time of the benchmark models")
    p.add_argument("--only", choices=R.MODEL_NAMES, help="benchmark one model (default: all)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--repeat", type=int, default=10, help="timed steps (median reported)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps after the first")
    p.add_argument("--threads", type=int, default=default_threads(),
                   help="intra-op threads (default: LATHE_NUM_THREADS or all cores)")
    p.add_argument("--compile", action="store_true",
                   help="also time torch.compile's training step; reports its first-step seconds")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    columns = ["model", "batch", "torch eager step ms"]
    if args.compile:
        columns += ["torch.compile step ms", "compile s"]
    print_header(columns)
    for name in [args.only] if args.only else R.MODEL_NAMES:
        start = time.perf_counter()
        cells = []
        for compiled in [False, True] if args.compile else [False]:
            try:
                first_s, ms = time_steps(make_step(name, args.batch_size, compiled), args.warmup,
                                         args.repeat)
                cells.append(f"{ms:.2f}")
                if compiled:
                    cells.append(f"{first_s:.1f}")
            except Exception as e:  # a broken model must not hide the others' numbers
                cells += [short_error(e)] + (["-"] if compiled else [])
        print(table_row([LABELS.get(name, name), args.batch_size, *cells]), flush=True)
        print(f"[peer_torch_training] {name}: {', '.join(cells)} "
              f"({time.perf_counter() - start:.1f}s, {args.threads} threads)", file=sys.stderr,
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
