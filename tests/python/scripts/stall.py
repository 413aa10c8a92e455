"""Run with LOCKSTEP_STALL_CHECK_TIME_SECONDS=1 and
LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS=3: the last rank never submits
"stalled.tensor"; rank 0 warns naming it and the missing rank, the op fails on
the ranks that submitted it instead of hanging, and collectives work afterwards."""

import time

import numpy as np
from rank_checks import assert_equal, expect_error, run_main

import lockstep.numpy as hvd

# Long enough for the others' stalled op to have failed (after ~3 s), short enough
# that their next op does not itself wait 3 s for this rank and get cancelled.
MISSING_RANK_DELAY_SECONDS = 4.5


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    missing = size - 1
    hvd.barrier()
    started = time.monotonic()
    if rank == missing:
        time.sleep(MISSING_RANK_DELAY_SECONDS)
    else:
        error = expect_error(
            hvd.LockstepError, ["stalled.tensor", "stall"], hvd.allreduce, np.ones(4, np.float32), name="stalled.tensor"
        )
        assert str(missing) in str(error), f"the error names missing rank {missing}: {error}"
        waited = time.monotonic() - started
        assert 2.5 <= waited <= 15, f"the stalled op failed after {waited:.1f} s; expected about 3 s"
        print(f"rank {rank}: stalled op failed after {waited:.1f} s: {error}", flush=True)
    result = hvd.allreduce(np.full(3, rank, np.float64), op=hvd.Sum, name="after.stall")
    assert_equal(result, np.full(3, sum(range(size)), np.float64), "allreduce after the stall")
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
