"""Several threads per rank issue synchronous allreduces at once (one of them runs the
cycles, the others wait for it) while another thread's async ops complete in the same
cycles; every result is checked exactly."""

import threading

import numpy as np
from rank_checks import assert_equal, run_main

import lockstep.numpy as hvd

THREADS = 4
OPS_PER_THREAD = 150


def sync_worker(thread, rank, size, failures):
    try:
        for step in range(OPS_PER_THREAD):
            values = np.arange(3, dtype=np.int64) + rank * 10 + step
            expected = np.arange(3, dtype=np.int64) * size + 10 * sum(range(size)) + step * size
            result = hvd.allreduce(values, op=hvd.Sum, name=f"thread{thread}.op")
            assert_equal(result, expected, f"thread {thread} step {step}")
    except BaseException as e:  # reported by the main thread
        failures.append(e)


def async_worker(rank, size, failures):
    try:
        for step in range(OPS_PER_THREAD // 10):
            handles = [
                hvd.allreduce_async(np.full(5, rank + i, np.float32), op=hvd.Sum, name=f"async.{i}") for i in range(10)
            ]
            for i, handle in enumerate(handles):
                want = np.full(5, sum(range(size)) + i * size, np.float32)
                assert_equal(hvd.synchronize(handle), want, f"async {i} step {step}")
    except BaseException as e:
        failures.append(e)


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    failures = []
    threads = [threading.Thread(target=sync_worker, args=(t, rank, size, failures)) for t in range(THREADS)]
    threads.append(threading.Thread(target=async_worker, args=(rank, size, failures)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
