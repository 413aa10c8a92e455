"""Prints the sockets this rank has in the LISTEN state after running collectives of
every kind, so the test can check that lockstep itself opens none (run with Open
MPI's TCP transport off; Open MPI's own listeners are its business, not lockstep's)."""

import os

import numpy as np
from rank_checks import run_main

import lockstep.numpy as hvd

LISTEN = {"tcp": "0A", "tcp6": "0A", "udp": "07", "udp6": "07"}
UNIX_LISTENING = "00010000"  # __SO_ACCEPTCON in /proc/net/unix's flags


def socket_inodes():
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    return inodes


def listening_sockets():
    mine = socket_inodes()
    found = []
    for table, state in LISTEN.items():
        with open(f"/proc/net/{table}") as stream:
            for row in stream.read().splitlines()[1:]:
                cols = row.split()
                if cols[9] in mine and cols[3] == state:
                    found.append(f"{table} {cols[1]}")
    with open("/proc/net/unix") as stream:
        for row in stream.read().splitlines()[1:]:
            cols = row.split()
            if cols[6] in mine and cols[3] == UNIX_LISTENING:
                found.append(f"unix {cols[7] if len(cols) > 7 else '(unnamed)'}")
    return found


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    hvd.allreduce(np.ones(1 << 18, np.float32), name="sockets.large")
    hvd.allgather(np.ones((rank + 1, 2), np.int32), name="sockets.gather")
    hvd.alltoall(np.ones((size, 2), np.int32), name="sockets.alltoall")
    hvd.broadcast_object({"rank": rank}, root_rank=0)
    print(f"rank {rank}: listening sockets: {listening_sockets()}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
