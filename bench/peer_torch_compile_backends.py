"""PyTorch eager vs torch.compile (inductor) vs torch.compile(backend="lathe"), same process, same
threads, on the reference models of tests/oracle/ref_models.py (plain torch.nn).

    PYTHONPATH=build/python .venv/bin/python bench/peer_torch_compile_backends.py \
        --models resnet18,mobilenet_v2 --batch 1 --repeat 10

Prints one markdown row per model: median ms per call of each mode and the ratios. Each compiled
mode is warmed up (compile + warmup calls) before timing; every mode's output is checked against
eager (lathe-bench's rule, tol 1e-3) and a mismatch is reported in the row.
"""
import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))
import ref_models  # noqa: E402

import lathe.torch  # noqa: E402,F401  (registers backend="lathe" in a build-tree checkout)


def close(out, ref, tol=1e-3):
    scale = ref.abs().max().item()
    return bool(((out - ref).abs() <= tol * min(1.0, scale) + tol * ref.abs()).all())


def time_calls(fn, inputs, warmup, repeat):
    for _ in range(warmup):
        fn(*inputs)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*inputs)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="resnet18,mobilenet_v2,squeezenet1_1,bert")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {a.batch}")
    print("| model | batch | torch eager ms | inductor ms | lathe backend ms "
          "| eager / inductor | eager / lathe | inductor / lathe | lathe first call s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in a.models.split(","):
        model = ref_models.build(name).eval()
        inputs = ref_models.default_input(name, a.batch, 0)
        with torch.no_grad():
            ref = model(*inputs)
            eager = time_calls(model, inputs, a.warmup, a.repeat)
            torch._dynamo.reset()
            ind = torch.compile(model, backend="inductor")
            ok_ind = close(ind(*inputs), ref)
            t_ind = time_calls(ind, inputs, a.warmup, a.repeat)
            torch._dynamo.reset()
            lat = torch.compile(model, backend="lathe")
            t0 = time.perf_counter()
            ok_lat = close(lat(*inputs), ref)
            first = time.perf_counter() - t0
            t_lat = time_calls(lat, inputs, a.warmup, a.repeat)
        flag = lambda ok: "" if ok else " (MISMATCH)"  # noqa: E731
        print(f"| {name} | {a.batch} | {eager:.2f} | {t_ind:.2f}{flag(ok_ind)} | "
              f"{t_lat:.2f}{flag(ok_lat)} | {eager / t_ind:.2f}x | {eager / t_lat:.2f}x | "
              f"{t_ind / t_lat:.2f}x | {first:.1f} |", flush=True)


if __name__ == "__main__":
    main()
