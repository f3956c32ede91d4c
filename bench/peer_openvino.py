"""Peer benchmark: OpenVINO (CPU, f32) inference latency on the Lathe benchmark models.

Each model is built from the plain-torch references in tests/oracle, exported to ONNX exactly as
peer_onnxruntime.py does (TorchScript exporter, opset 17), read by OpenVINO and compiled for the
CPU with the LATENCY performance hint, f32 inference precision (no bf16 down-conversion; with
--precision default OpenVINO's own choice, bf16 where the CPU has avx512_bf16 or AMX: the
precision it reports, INFERENCE_PRECISION_HINT, goes to the progress line) and --threads
inference threads. Inputs, warm-up, repeat and the table format are those of
peer_torch.py. A model whose export or compile fails gets the error in its row.

    python bench/peer_openvino.py [--only NAME] [--batch-size N] [--repeat N] [--threads N]
                                  [--precision f32|default]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_onnxruntime as O  # noqa: E402
import peer_torch as P  # noqa: E402


def compiled_model(path: str, threads: int, precision: str = "f32"):
    import openvino as ov

    core = ov.Core()
    config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads}
    if precision == "f32":
        config["INFERENCE_PRECISION_HINT"] = "f32"
    return core.compile_model(core.read_model(path), "CPU", config)


def bench_model(name: str, args, workdir: str) -> tuple[str, float]:
    """Returns (latency cell, export + compile seconds)."""
    model, inputs = P.model_and_inputs(name, args.batch_size, False)
    path = os.path.join(workdir, f"{name}.onnx")
    start = time.perf_counter()
    try:
        with torch.no_grad():
            O.export(model, inputs, path)
    except Exception as e:
        return "export " + P.short_error(e), time.perf_counter() - start
    try:
        compiled = compiled_model(path, args.threads, args.precision)
        args.reported_precision = str(compiled.get_property("INFERENCE_PRECISION_HINT"))
        request = compiled.create_infer_request()
        feeds = [t.contiguous().numpy() for t in inputs]
        prepare_s = time.perf_counter() - start
        return f"{P.median_ms(lambda: request.infer(feeds), args.repeat):.2f}", prepare_s
    except Exception as e:
        return "openvino " + P.short_error(e), time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="OpenVINO CPU latency of the benchmark models")
    P.add_common_args(p)
    p.add_argument("--precision", choices=["f32", "default"], default="f32",
                   help="f32 (INFERENCE_PRECISION_HINT f32) or OpenVINO's default (bf16 on "
                        "avx512_bf16 / AMX CPUs)")
    args = p.parse_args(argv)
    args.reported_precision = "?"
    torch.set_num_threads(args.threads)
    import openvino as ov

    P.print_header(["model", "batch", "openvino ms"])
    with tempfile.TemporaryDirectory(prefix="lathe-peer-ov-") as workdir:
        for name in [args.only] if args.only else P.R.MODEL_NAMES:
            start = time.perf_counter()
            cell, prepare_s = bench_model(name, args, workdir)
            print(P.table_row([P.LABELS.get(name, name), args.batch_size, cell]), flush=True)
            print(f"[peer_openvino] {name}: {cell} (export+compile {prepare_s:.1f}s, total "
                  f"{time.perf_counter() - start:.1f}s, openvino {ov.__version__}, "
                  f"{args.threads} threads, precision {args.precision}: reports "
                  f"{args.reported_precision})", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
