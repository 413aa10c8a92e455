"""Some ranks stop responding (frozen with SIGSTOP, or their host cut off) while the
job idles; the test applies the fault, then creates the file LOCKSTEP_TEST_GO_FILE.
Every rank then keeps submitting small allreduces and must get an AbortedError naming
the unresponsive ranks and hosts within the peer timeout, instead of hanging.
With the argument `large`, the ranks run 4 MiB allreduces once the file exists, and
the test freezes a rank in the middle of them."""

import os
import socket
import sys
import time

import numpy as np

import lockstep.numpy as hvd


def main():
    hvd.init()
    rank = hvd.rank()
    for step in range(3):
        hvd.allreduce(np.ones(4, np.float32), name=f"warm.{step}")
    print(f"rank {rank}: ready pid {os.getpid()} host {socket.gethostname()}", flush=True)
    go_file = os.environ["LOCKSTEP_TEST_GO_FILE"]
    while not os.path.exists(go_file):
        time.sleep(0.02)
    started = time.monotonic()
    large = sys.argv[1:] == ["large"]
    data = np.ones((1 << 20) if large else 4, np.float32)
    try:
        for _step in range(100000):
            hvd.allreduce(data, name="step")
            if not large:
                time.sleep(0.01)
    except hvd.AbortedError as error:
        print(f"rank {rank}: aborted after {time.monotonic() - started:.1f} s: {error}", flush=True)
        time.sleep(3)  # let the other ranks report before the launcher ends the job
        sys.exit(3)  # a normal exit: lockstep must not hang in MPI_Finalize
    print(f"rank {rank}: UNEXPECTED: allreduces kept completing", flush=True)


if __name__ == "__main__":
    main()
