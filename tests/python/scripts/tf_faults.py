"""Faults under lockstep.tensorflow's native ops, which never block a TensorFlow thread.

stall: the last rank never submits the collectives that the others fetch in one
Session run; the run fails within the stall shutdown time
(LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS=3) with FailedPreconditionError naming a
tensor and the missing rank, and collectives work afterwards.
death: rank 1 dies while the others wait in a tf.function's collectives; mpirun
must end the job with a non-zero status instead of hanging.
stall death: both in one launch (TensorFlow's start-up costs more than either): the
stall, then shutdown and init again without the stall settings, so that only mpirun
can end the job after the death, as in `death` alone.
"""

import os
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from rank_checks import assert_equal, expect_error, run_main  # noqa: E402

import lockstep.tensorflow as hvd  # noqa: E402

MISSING_RANK_DELAY_SECONDS = 4.5
STALL_SETTINGS = ("LOCKSTEP_STALL_CHECK_TIME_SECONDS", "LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS")


def stalled_session(rank, size):
    missing = size - 1
    hvd.barrier()
    if rank == missing:
        time.sleep(MISSING_RANK_DELAY_SECONDS)
    else:
        with tf.Graph().as_default():
            fetches = [
                hvd.allreduce(tf.ones([4]), name="tf.stalled.0"),
                hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="tf.stalled.1"),
                hvd.allgather(tf.ones([1, 2]), name="tf.stalled.2"),
            ]
            with tf.compat.v1.Session() as session:
                started = time.monotonic()
                error = expect_error(tf.errors.FailedPreconditionError, ["tf.stalled.", "stall"], session.run, fetches)
                waited = time.monotonic() - started
        assert str(missing) in str(error), f"the error names missing rank {missing}: {error}"
        assert waited <= 20, f"the stalled Session run failed after {waited:.1f} s; expected about 3 s"
        print(f"rank {rank}: stalled Session run failed after {waited:.1f} s", flush=True)
    result = hvd.allreduce(tf.fill([3], float(rank)), op=hvd.Sum, name="tf.after.stall")
    assert_equal(result.numpy(), np.full(3, sum(range(size)), np.float32), "allreduce after the stall")


def death_in_function(rank):
    @tf.function
    def step(x):
        return [hvd.allreduce(x * float(i), op=hvd.Sum, name=f"tf.death.{i}") for i in range(4)]

    step(tf.ones([1 << 16]))
    print(f"rank {rank}: first allreduce done", flush=True)
    if rank == 1:
        threading.Timer(0.5, os._exit, args=(1,)).start()
    for _ in range(100000):
        step(tf.ones([1 << 16]))
    print(f"rank {rank}: UNEXPECTED: the collectives completed without rank 1", flush=True)


def main():
    modes = sys.argv[1:]
    hvd.init()
    if "stall" in modes:
        stalled_session(hvd.rank(), hvd.size())
        print(f"rank {hvd.rank()}: stall checks passed", flush=True)
    if "death" in modes:
        if "stall" in modes:
            hvd.barrier()  # a rank's shutdown stops every rank: all must be done first
            hvd.shutdown()
            for setting in STALL_SETTINGS:
                os.environ.pop(setting, None)
            hvd.init()
        death_in_function(hvd.rank())


if __name__ == "__main__":
    run_main(main)
