"""Benchmark: the cost of one negotiation cycle as the rank count grows.

Each op is a lone 4-byte allreduce through lockstep.numpy, so its time is one cycle's
negotiation plus a 4-byte data allreduce:
- cached: a fixed name, so the response cache settles it with one AND across ranks;
- uncached: a new name every time, so every op also takes a full
  round through the coordinator (a gather of requests and a broadcast of responses);
- MPI_Allreduce 4 B and the AND vector alone (through mpi4py, on a duplicate
  communicator): the floor the two lockstep variants sit on.
Reported: median and p90 over ops of the slowest rank. Above the core count the job
is oversubscribed, so the numbers then mostly show scheduling, not the network.
At 2 ranks it also measures the parameters of docs/PERFORMANCE.md's cycle model:
alpha (one-way latency of an AND-vector-sized message, half a ping-pong), g (the gap
between back-to-back messages at one rank, what the star paid per peer at rank 0)
and beta (bandwidth of 4 MiB messages).
"""

import os

import harness
import numpy as np
from mpi4py import MPI

CACHE_WORDS = 2 + 2 * 16  # the AND vector for the default cache capacity of 1024 slots


def main():
    args = harness.parse_args(__doc__)
    ctx = harness.BenchContext()
    with harness.lockstep_running():
        run(args, ctx)


def make_variants(ctx):
    import lockstep.numpy as hvd

    array = np.ones(1, np.float32)
    received = np.empty_like(array)
    bits = np.full(CACHE_WORDS, ~np.uint64(0), np.uint64)
    bits_out = np.empty_like(bits)
    counter = iter(range(1 << 40))
    return {
        "lockstep cached": lambda: hvd.allreduce(array, name="negotiation.cached", op=hvd.Sum),
        "lockstep uncached": lambda: hvd.allreduce(array, name=f"negotiation.{next(counter)}", op=hvd.Sum),
        "MPI_Allreduce 4 B": lambda: ctx.comm.Allreduce(array, received, op=MPI.SUM),
        "MPI_Allreduce AND vector": lambda: ctx.comm.Allreduce(bits, bits_out, op=MPI.BAND),
    }


def model_parameters(ctx, reps):
    """alpha, g and beta between ranks 0 and 1 (raw MPI, mpi4py), medians over `reps`."""
    comm, rank = ctx.comm, ctx.rank
    small, big = np.zeros(CACHE_WORDS, np.uint64), np.zeros(4 << 20, np.uint8)
    burst = 256

    def ping_pong(buffer):
        ctx.barrier()
        start = MPI.Wtime()
        if rank == 0:
            comm.Send(buffer, 1)
            comm.Recv(buffer, 1)
        elif rank == 1:
            comm.Recv(buffer, 0)
            comm.Send(buffer, 0)
        return (MPI.Wtime() - start) / 2

    def gap():
        ctx.barrier()
        start = MPI.Wtime()
        if rank == 0:
            MPI.Request.Waitall([comm.Irecv(small.copy(), 1) for _ in range(burst)])
        elif rank == 1:
            MPI.Request.Waitall([comm.Isend(small, 0) for _ in range(burst)])
        return (MPI.Wtime() - start) / burst

    alpha = float(np.median([ping_pong(small) for _ in range(reps)]))
    g = float(np.median([gap() for _ in range(max(3, reps // 10))]))
    beta = big.nbytes / float(np.median([ping_pong(big) for _ in range(max(3, reps // 20))]))
    return {"alpha_s": alpha, "gap_s": g, "beta_bytes_per_s": beta, "message_bytes": small.nbytes}


def run(args, ctx):
    oversubscribed = ctx.size > (os.cpu_count() or 1)
    rounds, reps = (2, 10) if args.quick or oversubscribed else (10, 50)
    samples = harness.run_interleaved(ctx, make_variants(ctx), rounds, reps, warmup=5)
    rows = [dict(harness.summarize(seconds, reps), variant=name) for name, seconds in samples.items()]
    medians = ", ".join(f"{name} {np.median(s) * 1e6:.0f} us" for name, s in samples.items())
    ctx.log(f"{ctx.size} ranks: {medians}")
    payload = {
        "benchmark": "negotiation",
        "rounds": rounds,
        "reps": reps,
        "oversubscribed": oversubscribed,
        "cores": os.cpu_count(),
        "rows": rows,
    }
    if ctx.size == 2:
        payload["model"] = model_parameters(ctx, 50 if args.quick else 500)
        model = payload["model"]
        ctx.log(
            f"alpha {model['alpha_s'] * 1e6:.2f} us, g {model['gap_s'] * 1e6:.2f} us, "
            f"beta {model['beta_bytes_per_s'] / 1e9:.2f} GB/s"
        )
    ctx.write_json(args.out, payload)


if __name__ == "__main__":
    main()
