"""torch.distributed with the gloo backend, started inside an mpirun job.

Rank and size come from MPI; rank 0 picks a free localhost port for the TCP store
and tells the others, so several benchmarks can run one after another without
port clashes.
"""

import datetime
import socket

import torch.distributed as dist


def init_gloo(ctx):
    """Initialize the default process group (gloo) on the ranks of `ctx`."""
    port = ctx.comm.bcast(_free_port() if ctx.rank == 0 else None, root=0)
    dist.init_process_group(
        backend="gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=ctx.rank,
        world_size=ctx.size,
        timeout=datetime.timedelta(seconds=120),
    )


def shutdown_gloo():
    if dist.is_initialized():
        dist.destroy_process_group()


def _free_port():
    # Bind to port 0 and release: the kernel hands out a port nobody is using.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
