"""Peer benchmark: PyTorch eager (and optionally torch.compile) inference latency on the
Lathe benchmark models, built from the plain-torch references in tests/oracle.

Each model runs under torch.inference_mode on default_input (images 224x224, bert-base at
sequence 128, vit_base_patch16_224); 3 warm-up iterations are excluded and the median of
--repeat timed iterations is reported in milliseconds. Prints a markdown table on stdout
and one progress line per model on stderr.

    python bench/peer_torch.py [--only NAME] [--batch-size N] [--repeat N] [--threads N]
                               [--channels-last] [--compile [--freezing]] [--autocast]

--freezing sets torch._inductor.config.freezing (parameters folded into the compiled graph as
constants, weights prepacked for oneDNN: inductor's inference setting for CPU).
--autocast runs eager and torch.compile under torch.autocast("cpu", dtype=torch.bfloat16).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "oracle"))
import ref_models as R  # noqa: E402

WARMUP = 3
LABELS = {"bert": "bert-base (seq 128)", "vit": "vit_base_patch16_224"}
IMAGE_MODELS = set(R.CNN_NAMES) | {"vit"}


def default_threads() -> int:
    return int(os.environ.get("LATHE_NUM_THREADS") or os.cpu_count() or 1)


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", choices=R.MODEL_NAMES, help="benchmark one model (default: all)")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--repeat", type=int, default=30, help="timed iterations (median reported)")
    p.add_argument("--threads", type=int, default=default_threads(),
                   help="intra-op threads (default: LATHE_NUM_THREADS or all cores)")
    p.add_argument("--channels-last", action="store_true",
                   help="NHWC memory format for image models")


def model_and_inputs(name: str, batch: int, channels_last: bool):
    """The model in eval mode and its default input (seed 0)."""
    torch.manual_seed(0)
    model = R.build(name).eval()
    inputs = R.default_input(name, batch=batch, seed=0)
    if channels_last and name in IMAGE_MODELS:
        model = model.to(memory_format=torch.channels_last)
        inputs = tuple(t.contiguous(memory_format=torch.channels_last) for t in inputs)
    return model, inputs


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def table_row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def print_header(columns) -> None:
    print(table_row(columns))
    print(table_row(["---"] * len(columns)), flush=True)


def short_error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".splitlines()[0].replace("|", "/")
    return "error: " + (text[:150] + "..." if len(text) > 150 else text)


def bench_model(name: str, args) -> list[str]:
    model, inputs = model_and_inputs(name, args.batch_size, args.channels_last)
    cells = []
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast)
    with torch.inference_mode(), autocast:
        try:
            cells.append(f"{median_ms(lambda: model(*inputs), args.repeat):.2f}")
        except Exception as e:  # a broken model must not hide the others' numbers
            cells.append(short_error(e))
        if args.compile:
            try:
                if args.freezing:
                    import torch._inductor.config as inductor_config

                    inductor_config.freezing = True
                compiled = torch.compile(model)
                start = time.perf_counter()
                compiled(*inputs)
                compile_s = time.perf_counter() - start
                cells += [f"{median_ms(lambda: compiled(*inputs), args.repeat):.2f}",
                          f"{compile_s:.1f}"]
            except Exception as e:
                cells += [short_error(e), "-"]
    return cells


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="PyTorch eager latency of the benchmark models")
    add_common_args(p)
    p.add_argument("--compile", action="store_true",
                   help="also time torch.compile (default mode); reports compile seconds")
    p.add_argument("--freezing", action="store_true",
                   help="with --compile: inductor freezing (constant parameters, prepacked weights)")
    p.add_argument("--autocast", action="store_true",
                   help='run under torch.autocast("cpu", dtype=torch.bfloat16)')
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    columns = ["model", "batch", "torch eager ms"]
    if args.compile:
        columns += ["torch.compile ms", "compile s"]
    print_header(columns)
    for name in [args.only] if args.only else R.MODEL_NAMES:
        start = time.perf_counter()
        cells = bench_model(name, args)
        print(table_row([LABELS.get(name, name), args.batch_size, *cells]), flush=True)
        print(f"[peer_torch] {name}: {', '.join(cells)} ({time.perf_counter() - start:.1f}s, "
              f"{args.threads} threads)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
