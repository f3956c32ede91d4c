"""torch.compile(model, backend="lathe") inside PyTorch's own DistributedDataParallel (gloo):
two ranks as processes on localhost. Dynamo's DDP optimizer splits the captured graph at the
gradient-bucket boundaries, Lathe compiles each piece, and the compiled data-parallel training
gives the parameters that eager DDP gives on every rank."""
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc1 = torch.nn.Linear(8 * 6 * 6, 512)  # 0.6 MB
        self.fc2 = torch.nn.Linear(512, 1024)      # 2.1 MB: more than one 1 MB bucket
        self.fc3 = torch.nn.Linear(1024, 5)

    def forward(self, x):
        y = F.relu(self.conv(x)).flatten(1)
        return self.fc3(torch.tanh(self.fc2(F.relu(self.fc1(y)))))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, world, port, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    import lathe.torch
    torch.manual_seed(0)
    base = Net()
    g = torch.Generator().manual_seed(3)
    batches = [(torch.randn(8, 3, 6, 6, generator=g), torch.randint(0, 5, (8,), generator=g))
               for _ in range(3)]
    calls = []

    def lathe_backend(gm, example_inputs):  # counts the graphs the DDP optimizer hands over
        fn = lathe.torch.backend(gm, example_inputs)
        g = fn.__self__ if hasattr(fn, "__self__") else gm
        calls.append(sum(isinstance(m, lathe.torch.LatheSubgraph) for m in g.modules()))
        return fn

    final = {}
    for mode in ("eager", "lathe"):
        model = Net()
        model.load_state_dict(base.state_dict())
        # 1 MB buckets (PyTorch's first bucket size): several, so that dynamo splits the graph.
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
        fn = torch.compile(ddp, backend=lathe_backend) if mode == "lathe" else ddp
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for x, y in batches:
            share = x.shape[0] // world
            xs, ys = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
            opt.zero_grad()
            F.cross_entropy(fn(xs), ys).backward()
            opt.step()
        final[mode] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    worst = max((final["lathe"][k] - final["eager"][k]).abs().max().item() for k in final["eager"])
    results.put((rank, worst, len(calls), sum(calls)))
    dist.destroy_process_group()


def test_compiled_ddp_equals_eager_ddp_on_two_ranks():
    torch._dynamo.reset()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank, args=(r, 2, port, results)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    codes = [p.exitcode for p in procs]
    assert codes == [0, 0], f"rank exit codes {codes}"
    got = [results.get(timeout=10) for _ in range(2)]
    for rank, worst, graphs, lathe_subgraphs in got:
        assert worst <= 1e-5, f"rank {rank}: compiled DDP differs from eager DDP by {worst}"
        assert graphs >= 2, f"rank {rank}: dynamo did not split the graph at buckets ({graphs} graph for Lathe)"
        assert lathe_subgraphs >= graphs, f"rank {rank}: only {lathe_subgraphs} Lathe subgraphs in {graphs} graphs"
