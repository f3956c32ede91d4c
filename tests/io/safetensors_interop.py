"""Writes and reads safetensors files with the reference Python library, for the C++ interop test.

  safetensors_interop.py write OUT.safetensors EXPECTED.txt   # torch tensors -> file + values
  safetensors_interop.py read IN.safetensors VALUES.txt        # file -> values (numpy only)

The text format, one tensor per line: "tensor NAME DTYPE d0,d1,... v0 v1 ..." with values as
exact float64 reprs (F16/BF16 values widened exactly), then "meta KEY VALUE" lines.
Exits with 77 when a needed package is missing, so the C++ test can skip.
"""
import sys


def need(modules):
    try:
        return [__import__(m, fromlist=["_"]) for m in modules]
    except ImportError as e:
        print(f"missing python package: {e}", file=sys.stderr)
        sys.exit(77)


def dump(tensors, metadata, path):
    """tensors: name -> (dtype name, shape tuple, flat list of python numbers)."""
    with open(path, "w") as f:
        for name in sorted(tensors):
            dtype, shape, values = tensors[name]
            shape = ",".join(str(d) for d in shape) or "-"
            f.write(" ".join(["tensor", name, dtype, shape] +
                             [repr(float(v)) for v in values]) + "\n")
        for k in sorted(metadata or {}):
            f.write(f"meta {k} {metadata[k]}\n")


def write(out, expected):
    torch, st_torch = need(["torch", "safetensors.torch"])
    names = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64",
             torch.int32: "I32", torch.bool: "BOOL", torch.float16: "F16",
             torch.bfloat16: "BF16"}
    g = torch.Generator().manual_seed(0)
    tensors = {
        "f32": torch.randn(3, 4, generator=g),
        "f64": torch.randn(5, generator=g, dtype=torch.float64),
        "i64": torch.randint(-10**12, 10**12, (2, 3), generator=g),
        "i32": torch.randint(-10**6, 10**6, (7,), generator=g, dtype=torch.int32),
        "mask": torch.rand(2, 2, generator=g) > 0.5,
        "half": torch.randn(3, 3, generator=g).to(torch.float16),
        "bf16": torch.randn(4, generator=g).to(torch.bfloat16),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "layer.0.weight": torch.randn(2, 3, generator=g),
    }
    metadata = {"format": "pt", "source": "python"}
    st_torch.save_file(tensors, out, metadata=metadata)
    dump({k: (names[t.dtype], tuple(t.shape), t.reshape(-1).to(torch.float64).tolist())
          for k, t in tensors.items()}, metadata, expected)


def read(path, out):
    np, safetensors = need(["numpy", "safetensors"])
    names = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int64"): "I64",
             np.dtype("int32"): "I32", np.dtype("bool"): "BOOL"}
    with safetensors.safe_open(path, framework="np") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        metadata = f.metadata()
    dump({k: (names[a.dtype], a.shape, a.reshape(-1).astype(np.float64).tolist())
          for k, a in tensors.items()}, metadata, out)


if __name__ == "__main__":
    {"write": write, "read": read}[sys.argv[1]](sys.argv[2], sys.argv[3])
