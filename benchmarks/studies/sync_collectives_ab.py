"""Synchronous collectives other than allreduce, with and without waking the background
thread per op (docs/PERFORMANCE.md, "Synchronous collectives run on the caller").

`drive` is lockstep as it is: a synchronous broadcast, allgather, grouped allreduce or
barrier hands its op to the core without waking the background thread, and runs the
cycle itself while it waits. `wake` restores the earlier behaviour for comparison
(every op wakes the background thread, which usually runs the cycle and hands the
result back), by switching off the dispatcher's check for the duration of its rounds.
The two alternate round by round in one job; the times are rank 0's.

    PYTHONPATH=python mpirun -np 2 --bind-to core .venv/bin/python benchmarks/studies/sync_collectives_ab.py
"""

import argparse
import time

import numpy as np
import torch

import lockstep.torch as hvd
from lockstep.common.process import DISPATCHER

# The convnet of the training benchmark: its 12 parameter tensors (197 KB of float32).
CONVNET_GRADIENT_SIZES = (108, 12, 12, 10368, 24, 24, 27648, 32, 8192, 256, 2560, 10)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--ops", type=int, default=200, help="timed ops per variant and round")
    args = parser.parse_args()
    hvd.init()
    torch.set_num_threads(1)
    small = torch.ones(4)
    smalls = [torch.ones(4) for _ in range(4)]
    gradients = [torch.ones(n) for n in CONVNET_GRADIENT_SIZES]
    ops = {
        "grouped_allreduce_, 12 convnet gradients": lambda: hvd.grouped_allreduce_(gradients, name="g12"),
        "grouped_allreduce, 4 x 16 B": lambda: hvd.grouped_allreduce(smalls, name="g4"),
        "broadcast, 16 B": lambda: hvd.broadcast(small, 0, name="b"),
        "allgather, 16 B": lambda: hvd.allgather(small, name="ag"),
        "barrier": hvd.barrier,
    }
    drive = DISPATCHER._caller_will_wait
    modes = {"drive": drive, "wake": lambda items: False}
    times = {(op, mode): [] for op in ops for mode in modes}
    for round_index in range(args.rounds):
        order = ("drive", "wake") if round_index % 2 == 0 else ("wake", "drive")
        for mode in order:
            DISPATCHER._caller_will_wait = modes[mode]
            for op, call in ops.items():
                for _ in range(20):
                    call()
                for _ in range(args.ops):
                    start = time.perf_counter()
                    call()
                    times[(op, mode)].append(time.perf_counter() - start)
    DISPATCHER._caller_will_wait = drive
    if hvd.rank() == 0:
        print(f"{hvd.size()} ranks, {args.rounds} rounds x {args.ops} ops; median / p90 in us")
        print(f"{'op':42s} {'wake (before)':>16s} {'drive (now)':>16s}")
        for op in ops:
            cells = []
            for mode in ("wake", "drive"):
                values = np.array(times[(op, mode)]) * 1e6
                cells.append(f"{np.median(values):6.1f} / {np.percentile(values, 90):6.1f}")
            print(f"{op:42s} {cells[0]:>16s} {cells[1]:>16s}")
    hvd.shutdown()


if __name__ == "__main__":
    main()
