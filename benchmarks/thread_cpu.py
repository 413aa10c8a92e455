"""CPU time and wake-ups of one named thread of this process, from the kernel's
scheduler statistics (/proc/self/task/<tid>/schedstat: nanoseconds on a CPU, time
waiting to run, times scheduled). Used to measure lockstep's background thread
("lockstep-bg") while a benchmark runs."""

import os
import time


def find_thread(name):
    """The thread id of the first thread called `name`, or None."""
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as stream:
                if stream.read().strip() == name:
                    return int(tid)
        except OSError:
            continue  # the thread ended meanwhile
    return None


class ThreadMeter:
    """Accumulates a thread's CPU nanoseconds and times scheduled, and the wall time,
    across measured spans."""

    def __init__(self, name):
        self.tid = find_thread(name)
        self.cpu_ns = 0
        self.scheduled = 0
        self.wall_s = 0.0
        self.spans = 0
        self._start = None

    def _read(self):
        with open(f"/proc/self/task/{self.tid}/schedstat") as stream:
            on_cpu, _waiting, scheduled = (int(field) for field in stream.read().split())
        return on_cpu, scheduled

    def __enter__(self):
        if self.tid is not None:
            self._start = (*self._read(), time.perf_counter())
        return self

    def __exit__(self, *exc):
        if self.tid is not None:
            on_cpu, scheduled = self._read()
            self.cpu_ns += on_cpu - self._start[0]
            self.scheduled += scheduled - self._start[1]
            self.wall_s += time.perf_counter() - self._start[2]
            self.spans += 1
        return False
