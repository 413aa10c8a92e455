"""The survivors of lost processes go on in process (ULFM), twice in a row.

    ulfm_recovery.py KIND    4 ranks under `mpirun --with-ft ulfm`

1. The rank that started as 1 SIGKILLs itself while every rank streams KIND
   collectives. Each survivor's next call fails with HorovodInternalError; their
   agreement says a process failed (the same answer on every survivor), and they
   recover on 3 ranks, where KIND and an allreduce give the 3-rank results.
2. Their agreement now says every process is alive. The rank that started as 2 then
   SIGKILLs itself while the others go straight to the agreement, whose engines have
   met no failed call: the agreement must find the loss all the same, and they
   recover on 2 ranks.

Each survivor prints "rank S: recovered to r/n" (S: the rank it started as) after
each recovery and "rank S: done" at the end.
"""

import os
import signal
import sys
import threading
import time

import numpy as np
from faults import collective
from rank_checks import assert_equal, run_main, world_rank

import lockstep.numpy as hvd
from lockstep.common import basics

FIRST_VICTIM, SECOND_VICTIM = 1, 2


def check_after_recovery(kind, start_rank, expected_size):
    rank, size = hvd.rank(), hvd.size()
    assert size == expected_size, f"{size} ranks after the recovery, expected {expected_size}"
    collective(kind, rank, size)
    total = hvd.allreduce(np.full(1000, start_rank, np.int64), op=hvd.Sum, name=f"after.{size}")
    assert_equal(total, np.full(1000, int(total[0]), np.int64), "allreduce after the recovery")
    print(f"rank {start_rank}: recovered to {rank}/{size}", flush=True)


def main():
    kind = sys.argv[1]
    hvd.init()
    start_rank, start_size = hvd.rank(), hvd.size()
    assert start_rank == world_rank() and start_size == 4, (start_rank, start_size)
    assert basics.can_recover_in_process(), "the job runs without ULFM"
    collective(kind, start_rank, start_size)
    print(f"rank {start_rank}: first {kind} done", flush=True)

    if start_rank == FIRST_VICTIM:
        threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGKILL)).start()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            collective(kind, start_rank, start_size)
        print(f"rank {start_rank}: UNEXPECTED: {kind} kept completing without rank {FIRST_VICTIM}", flush=True)
        return
    except hvd.HorovodInternalError as error:
        print(f"rank {start_rank}: lost: {' '.join(str(error).split())}", flush=True)
    assert not basics.every_process_alive(), "the agreement found no failed process"
    basics.recover_with_survivors()
    check_after_recovery(kind, start_rank, 3)

    assert basics.every_process_alive(), "the agreement found a failed process where none is"
    if start_rank == SECOND_VICTIM:
        os.kill(os.getpid(), signal.SIGKILL)
    assert not basics.every_process_alive(), "the agreement missed the second loss"
    basics.recover_with_survivors()
    check_after_recovery(kind, start_rank, 2)
    print(f"rank {start_rank}: done", flush=True)


if __name__ == "__main__":
    run_main(main)
