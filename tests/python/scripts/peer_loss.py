"""Some ranks stop responding (frozen with SIGSTOP, or their host cut off) while the
job idles; the test applies the fault, then creates the file LOCKSTEP_TEST_GO_FILE.
Every rank then keeps submitting small allreduces and must get an AbortedError naming
the unresponsive ranks and hosts within the peer timeout, instead of hanging.
With the argument `large`, the ranks run 4 MiB allreduces once the file exists, and
the test freezes a rank in the middle of them; with `broadcast`, 16 MiB broadcasts
from rank 0, which some ranks leave (for negotiation) while rank 0 is still sending to
the frozen one."""

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
    mode = sys.argv[1] if len(sys.argv) > 1 else "small"
    data = np.ones({"small": 4, "large": 1 << 20, "broadcast": 1 << 22}[mode], np.float32)
    try:
        for _step in range(100000):
            if mode == "broadcast":
                hvd.broadcast(data, root_rank=0, name="step")
            else:
                hvd.allreduce(data, name="step")
            if mode == "small":
                time.sleep(0.01)
    except hvd.AbortedError as error:
        print(f"rank {rank}: aborted after {time.monotonic() - started:.1f} s: {error}", flush=True)
        time.sleep(3)  # let the other ranks report before the launcher ends the job
        sys.exit(3)  # a normal exit: lockstep must not hang in MPI_Finalize
    print(f"rank {rank}: UNEXPECTED: allreduces kept completing", flush=True)


if __name__ == "__main__":
    main()
