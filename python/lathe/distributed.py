"""Data-parallel training on Gloo from Python, named as torch.distributed names it.

    import lathe, lathe.distributed as dist
    dist.init_process_group()            # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    ddp = dist.DistributedDataParallel(model)
    loss = lathe.cross_entropy(ddp(x), y); loss.backward()   # gradients averaged over ranks
    with dist.no_sync(ddp): ...           # accumulate without communicating

Start the ranks with lathe-run (build/lathe-run --nproc-per-node N python script.py) or torchrun.
"""
import contextlib

from ._C import distributed as _native

Work = _native.Work
ProcessGroup = _native.ProcessGroup
DistributedDataParallel = _native.DistributedDataParallel
init_process_group = _native.init_process_group
is_initialized = _native.is_initialized
destroy_process_group = _native.destroy_process_group
get_rank = _native.get_rank
get_world_size = _native.get_world_size
all_reduce = _native.all_reduce
broadcast = _native.broadcast
all_gather = _native.all_gather
barrier = _native.barrier


@contextlib.contextmanager
def no_sync(ddp):
    """Backwards inside only accumulate gradients locally; the next one outside reduces them."""
    ddp.set_sync(False)
    try:
        yield
    finally:
        ddp.set_sync(True)
