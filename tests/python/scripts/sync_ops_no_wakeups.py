"""Synchronous collectives other than allreduce (broadcast, allgather, alltoall,
reducescatter, grouped allreduce, barrier) run their cycle on the calling thread:
they must not wake lockstep's background thread for every op, which cost a hand-off
to it and back (docs/PERFORMANCE.md, "Synchronous collectives run on the caller").
Every result is checked exactly. With a long cycle time the background thread has
few idle cycles of its own, so its voluntary context switches count the wake-ups:
one or more per op before, a handful in all now. Its idle cycles (a few switches
each) are allowed for from the run's duration, which sanitizers and a loaded machine
stretch.

Argument: the frontend, numpy or torch."""

import os
import sys
import time

import numpy as np
from rank_checks import assert_equal, run_main

ROUNDS = 100
KINDS = 6  # collectives per round


def background_thread_switches():
    """Voluntary context switches of this process's lockstep-bg thread."""
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as comm:
                if comm.read().strip() != "lockstep-bg":
                    continue
            with open(f"/proc/self/task/{tid}/status") as status:
                for line in status:
                    if line.startswith("voluntary_ctxt_switches"):
                        return int(line.split()[1])
        except OSError:
            continue
    raise AssertionError("no lockstep-bg thread in this process")


def main():
    frontend = sys.argv[1]
    if frontend == "torch":
        import torch

        import lockstep.torch as hvd

        def array(values):
            return torch.from_numpy(np.ascontiguousarray(values))

        def plain(tensor):
            return tensor.numpy()
    else:
        import lockstep.numpy as hvd

        def array(values):
            return np.ascontiguousarray(values)

        def plain(values):
            return values

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    hvd.barrier()
    before = background_thread_switches()
    started = time.monotonic()
    for step in range(ROUNDS):
        mine = np.arange(size * 2, dtype=np.int64) + 100 * rank + step
        everyone = [np.arange(size * 2, dtype=np.int64) + 100 * r + step for r in range(size)]
        assert_equal(plain(hvd.broadcast(array(mine), 0, name="b")), everyone[0], f"broadcast {step}")
        assert_equal(plain(hvd.allgather(array(mine), name="ag")), np.concatenate(everyone), f"allgather {step}")
        received = plain(hvd.alltoall(array(mine), name="a2a"))
        assert_equal(received, np.concatenate([e[rank * 2 : rank * 2 + 2] for e in everyone]), f"alltoall {step}")
        total = sum(everyone)
        share = plain(hvd.reducescatter(array(mine), name="rs", op=hvd.Sum))
        assert_equal(share, total[rank * 2 : rank * 2 + 2], f"reducescatter {step}")
        grouped = hvd.grouped_allreduce([array(mine), array(mine[:3])], name="g", op=hvd.Sum)
        assert_equal(plain(grouped[0]), total, f"grouped_allreduce[0] {step}")
        assert_equal(plain(grouped[1]), total[:3], f"grouped_allreduce[1] {step}")
        hvd.barrier()
    switches = background_thread_switches() - before
    elapsed = time.monotonic() - started
    ops = ROUNDS * KINDS
    # Measured at 3 ranks on 2 cores: 0-12 switches for 600 ops now, 630-1100 when
    # every op woke the thread. Under ASan with both cores busy the run takes 1-5 s
    # and each idle cycle costs 2-4 switches (38 per second at a 50 ms cycle, 7 at 500).
    idle_cycles = elapsed * 1000 / float(os.environ["LOCKSTEP_CYCLE_TIME"])
    allowed = ops // 4 + int(4 * idle_cycles)
    assert switches < allowed, (
        f"lockstep's background thread switched {switches} times for {ops} synchronous ops "
        f"in {elapsed:.2f} s (allowed {allowed})"
    )
    print(
        f"rank {rank}: {switches} background-thread switches for {ops} synchronous ops in {elapsed:.2f} s", flush=True
    )
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
