"""A tensor that one member of a set never submits: the set's own stall inspector
warns and, after the stall shutdown time, fails it on the member that waits, with
the set and its global ranks named; ranks outside the set are not involved."""

import sys
import time
from pathlib import Path

import numpy as np
from rank_checks import run_main

import lockstep.numpy as hvd


def main():
    done_marker = Path(sys.argv[1]) / "rank0.done"
    hvd.init()
    size = hvd.size()
    pair = hvd.add_process_set([0, size - 1])
    if hvd.rank() == 0:
        started = time.monotonic()
        try:
            hvd.allreduce(np.ones(2), name="never.partnered", process_set=pair)
        except hvd.PreconditionError as error:
            message = str(error)
            assert "stalled" in message and "'never.partnered'" in message, message
            assert f"on process set 1, whose ranks 0, 1, ... are global ranks [0, {size - 1}]" in message, message
        else:
            raise AssertionError("an op that its set's other member never submitted completed")
        assert time.monotonic() - started < 20, "the stall shutdown time applies on sets too"
        done_marker.touch()
    else:
        # Stay up (a shutdown would fail the op differently), never submit, and call
        # the barrier only once rank 0 is free, so the barrier itself cannot stall.
        deadline = time.monotonic() + 30
        while not done_marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    hvd.barrier()


if __name__ == "__main__":
    run_main(main)
