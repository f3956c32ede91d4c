"""PyTorch eager vs torch.compile (inductor, freezing on) vs torch.compile(backend="lathe"), same
process, same threads, on the reference models of tests/oracle/ref_models.py (plain torch.nn).

    PYTHONPATH=build/python .venv/bin/python bench/peer_torch_compile_backends.py \
        --models resnet18,mobilenet_v2 --batch 1,8 --repeat 10 --threads 2

Prints one markdown row per model and batch: median ms per call of each mode and the ratios. Each
compiled mode is warmed up (compile + warmup calls) before timing, then the three modes' timed calls
alternate (one call each in turn, `--repeat` rounds); every mode's output is checked against eager (lathe-bench's rule, tol 1e-3) and a mismatch is reported in the row. --threads sets
torch's intra-op threads and Lathe's (LATHE_NUM_THREADS, read when lathe is first imported).
"""
import argparse
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))


def close(out, ref, tol=1e-3):
    if isinstance(ref, (tuple, list)):  # bert: (sequence output, pooled output)
        return all(close(o, r, tol) for o, r in zip(out, ref))
    scale = ref.abs().max().item()
    return bool(((out - ref).abs() <= tol * min(1.0, scale) + tol * ref.abs()).all())


def time_interleaved(fns, inputs, warmup, repeat):
    """Median ms per call of each fn. The calls rotate (eager, inductor, lathe, eager, ...) so that
    every mode sees the same load on a shared machine; each fn gets `warmup` untimed calls."""
    for fn in fns:
        for _ in range(warmup):
            fn(*inputs)
    times = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn(*inputs)
            times[k].append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) for t in times]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="all", help="comma list of ref_models names, or all")
    p.add_argument("--batch", default="1", help="comma list of batch sizes")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="0: the libraries' defaults")
    a = p.parse_args()
    if a.threads:
        os.environ["LATHE_NUM_THREADS"] = str(a.threads)
    import torch
    import torch._inductor.config as inductor_config

    import lathe.torch  # noqa: F401  (registers backend="lathe" in a build-tree checkout)
    import ref_models

    if a.threads:
        torch.set_num_threads(a.threads)
    # Inductor's freezing (parameters as constants, as Lathe's cpu backend does) is switched on
    # only while inductor compiles: set globally it also changes how dynamo hands parameters to
    # every backend (backend="lathe" then gets them as per-call inputs it cannot freeze).
    models = ref_models.MODEL_NAMES if a.models == "all" else a.models.split(",")
    batches = [int(b) for b in a.batch.split(",")]
    print(f"torch {torch.__version__}, torch threads {torch.get_num_threads()}, "
          f"LATHE_NUM_THREADS={os.environ.get('LATHE_NUM_THREADS', '(all cores)')}, "
          f"inductor freezing on, repeat {a.repeat}, warmup {a.warmup}", flush=True)
    print("| model | batch | torch eager ms | inductor ms | lathe backend ms "
          "| eager / inductor | eager / lathe | inductor / lathe | inductor first call s "
          "| lathe first call s |", flush=True)
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    ratios = []
    for name in models:
        model = ref_models.build(name).eval()
        for batch in batches:
            inputs = ref_models.default_input(name, batch, 0)
            with torch.no_grad():
                ref = model(*inputs)
                torch._dynamo.reset()
                # Two torch.compile wrappers of one module: dynamo keeps one cache entry per
                # backend (the second compile is a cache miss on the backend guard).
                ind = torch.compile(model, backend="inductor")
                t0 = time.perf_counter()
                with inductor_config.patch(freezing=True):
                    ok_ind = close(ind(*inputs), ref)
                first_ind = time.perf_counter() - t0
                lat = torch.compile(model, backend="lathe")
                t0 = time.perf_counter()
                ok_lat = close(lat(*inputs), ref)
                first_lat = time.perf_counter() - t0
                eager, t_ind, t_lat = time_interleaved([model, ind, lat], inputs, a.warmup,
                                                       a.repeat)
                del ind, lat
                torch._dynamo.reset()
            ratios.append(t_ind / t_lat)
            flag = lambda ok: "" if ok else " (MISMATCH)"  # noqa: E731
            print(f"| {name} | {batch} | {eager:.2f} | {t_ind:.2f}{flag(ok_ind)} | "
                  f"{t_lat:.2f}{flag(ok_lat)} | {eager / t_ind:.2f}x | {eager / t_lat:.2f}x | "
                  f"{t_ind / t_lat:.2f}x | {first_ind:.1f} | {first_lat:.1f} |", flush=True)
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"\ngeomean inductor / lathe over {len(ratios)} rows: {geo:.2f}x", flush=True)


if __name__ == "__main__":
    main()
