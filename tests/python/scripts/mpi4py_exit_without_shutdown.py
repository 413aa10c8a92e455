"""mpi4py imported first and no shutdown() call: the program must still exit
cleanly. mpi4py finalizes MPI from Python's atexit, so lockstep has to stop its
background thread before that happens."""

import numpy as np
from mpi4py import MPI  # noqa: F401  (initializes MPI before lockstep does)
from rank_checks import assert_equal, run_main

import lockstep.numpy as hvd


def main():
    hvd.init()
    total = hvd.allreduce(np.ones(2, np.float32), op=hvd.Sum, name="before.exit")
    assert_equal(total, np.full(2, hvd.size(), np.float32), "allreduce before exit")
    # No hvd.shutdown(): the exit hooks must take care of it.


if __name__ == "__main__":
    run_main(main)
