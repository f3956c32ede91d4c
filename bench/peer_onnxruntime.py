"""Peer benchmark: ONNX Runtime (CPU) inference latency on the Lathe benchmark models.

Each model is built from the plain-torch references in tests/oracle, exported with
torch.onnx.export (TorchScript exporter, dynamo=False where that option exists, opset 17)
into a temporary folder and run by an InferenceSession with all graph optimizations and
intra_op_num_threads = --threads. Inputs, warm-up, repeat and the table format are those
of peer_torch.py. A model whose export or session fails gets the error in its row.
--channels-last only changes the torch model before export: the ONNX graph is the same,
and ONNX Runtime picks its own layouts.

    python bench/peer_onnxruntime.py [--only NAME] [--batch-size N] [--repeat N]
                                     [--threads N] [--channels-last]
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import tempfile
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_torch as P  # noqa: E402

OPSET = 17


def export(model, inputs, path: str) -> None:
    names_in = [f"input.{i}" for i in range(len(inputs))]
    kwargs = dict(opset_version=OPSET, input_names=names_in, do_constant_folding=True)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated, and says so
        torch.onnx.export(model, inputs, path, **kwargs)


def session(path: str, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def bench_model(name: str, args, workdir: str) -> tuple[str, float]:
    """Returns (latency cell, export seconds)."""
    model, inputs = P.model_and_inputs(name, args.batch_size, args.channels_last)
    path = os.path.join(workdir, f"{name}.onnx")
    start = time.perf_counter()
    try:
        with torch.no_grad():
            export(model, inputs, path)
    except Exception as e:
        return "export " + P.short_error(e), time.perf_counter() - start
    export_s = time.perf_counter() - start
    try:
        sess = session(path, args.threads)
        feeds = {f"input.{i}": t.contiguous().numpy() for i, t in enumerate(inputs)}
        return f"{P.median_ms(lambda: sess.run(None, feeds), args.repeat):.2f}", export_s
    except Exception as e:
        return "onnxruntime " + P.short_error(e), export_s


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="ONNX Runtime CPU latency of the benchmark models")
    P.add_common_args(p)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    import onnxruntime as ort

    P.print_header(["model", "batch", "onnxruntime ms"])
    with tempfile.TemporaryDirectory(prefix="lathe-peer-ort-") as workdir:
        for name in [args.only] if args.only else P.R.MODEL_NAMES:
            start = time.perf_counter()
            cell, export_s = bench_model(name, args, workdir)
            print(P.table_row([P.LABELS.get(name, name), args.batch_size, cell]), flush=True)
            print(f"[peer_onnxruntime] {name}: {cell} (export {export_s:.1f}s, total "
                  f"{time.perf_counter() - start:.1f}s, onnxruntime {ort.__version__}, "
                  f"{args.threads} threads)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
