"""A rank frozen inside a process set's data collective (3 ranks, set [0, 1]): rank 1
stops itself with SIGSTOP while both members run 4 MiB allreduces on the set, and
rank 2, outside the set, idles. The members' collective watchdog must end the job
without naming anyone: rank 2 is idle, not silent, and rank 0 cannot ask the others
(CollectiveWatchdog asks only about collectives of every rank)."""

import os
import signal
import threading
import time

import numpy as np

import lockstep.numpy as hvd


def main():
    hvd.init()
    rank = hvd.rank()
    members = hvd.add_process_set([0, 1])
    if rank == 2:
        print("rank 2: idle outside the set", flush=True)
        time.sleep(120)  # MPI_Abort ends it
        return
    data = np.ones(1 << 20, np.float32)
    hvd.allreduce(data, name="warm", process_set=members)
    if rank == 1:
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGSTOP)).start()
    print(f"rank {rank}: allreduces on the set", flush=True)
    try:
        for _step in range(1000000):
            hvd.allreduce(data, name="step", process_set=members)
    except hvd.AbortedError as error:  # the freeze came while negotiating: named there
        print(f"rank {rank}: aborted: {error}", flush=True)
        time.sleep(3)
        os._exit(3)


if __name__ == "__main__":
    main()
