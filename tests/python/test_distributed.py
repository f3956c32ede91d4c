"""lathe.distributed from Python: two ranks as processes on localhost (the collectives, and
DistributedDataParallel on a lathe.nn model equal to one process on the whole batch)."""
import os
import socket
import subprocess
import sys
import textwrap

RANK_SCRIPT = textwrap.dedent("""
    import numpy as np
    import lathe
    import lathe.distributed as dist

    dist.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    t = lathe.tensor([1.0 * r, 2.0])
    dist.all_reduce(t)
    assert np.allclose(np.from_dlpack(t), [n * (n - 1) / 2, 2.0 * n]), np.from_dlpack(t)
    w = dist.all_reduce(lathe.tensor([float(r)]), op="avg", async_op=True)
    w.wait()
    b = lathe.tensor([10.0 * r])
    dist.broadcast(b, src=1)
    assert float(np.from_dlpack(b)[0]) == 10.0
    g = np.from_dlpack(dist.all_gather(lathe.tensor([float(r)])))
    assert g.shape == (n, 1) and list(g[:, 0]) == list(range(n)), g

    def model():
        lathe.manual_seed(7)
        m = lathe.nn.Sequential(lathe.nn.Linear(6, 8), lathe.nn.ReLU(), lathe.nn.Linear(8, 3))
        for p in m.parameters():
            p.requires_grad_(True)
        return m

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    y = np.array([0, 1, 2, 1, 0, 2, 2, 1], dtype=np.int64)
    ref = model()
    lathe.cross_entropy(ref(lathe.tensor(x)), lathe.tensor(y)).backward()
    rep = model()
    ddp = dist.DistributedDataParallel(rep)
    share = 8 // n
    xs, ys = lathe.tensor(x[r * share:(r + 1) * share]), lathe.tensor(y[r * share:(r + 1) * share])
    with dist.no_sync(ddp):  # accumulate half, then reduce: the average of both halves
        (lathe.cross_entropy(ddp(xs), ys) * 0.5).backward()
    (lathe.cross_entropy(ddp(xs), ys) * 0.5).backward()
    for (name, p), (_, q) in zip(ref.named_parameters(), rep.named_parameters()):
        a, b = np.from_dlpack(p.grad), np.from_dlpack(q.grad)
        assert np.allclose(a, b, atol=1e-6), (name, np.abs(a - b).max())
    print("OK rank", r)
""")


def test_collectives_and_ddp_on_two_ranks():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1", LATHE_DIST_TIMEOUT="60")
        procs.append(subprocess.Popen([sys.executable, "-c", RANK_SCRIPT], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for r, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and f"OK rank {r}" in out, f"rank {r}:\\n{out}"
