"""The frontend-level handle table.

A frontend handle stands for one or more core handles (a group has several) plus
what the result needs: the Python objects whose memory the core reads or writes
must stay alive until the core is done, and a function that turns the core's
results into the frontend's result.
"""

import threading
from dataclasses import dataclass
from typing import Any, Callable, List


@dataclass
class PendingOp:
    core_handles: List[int]
    # Called with the list of core Results, one per core handle, in order.
    finish: Callable[[list], Any]
    # Objects that own the input/output memory; dropped once the op is finished.
    keepalive: tuple


class HandleTable:
    def __init__(self):
        self._lock = threading.Lock()
        self._pending = {}
        self._next_handle = 0

    def add(self, pending):
        with self._lock:
            handle = self._next_handle
            self._next_handle += 1
            self._pending[handle] = pending
        return handle

    def get(self, handle):
        with self._lock:
            return self._pending[self._checked(handle)]

    def pop(self, handle):
        with self._lock:
            return self._pending.pop(self._checked(handle))

    def __len__(self):
        with self._lock:
            return len(self._pending)

    def idle(self):
        """Whether no handle is outstanding; lock-free, for the per-op path (the answer
        can be stale by the time it is used, with the lock as without it)."""
        return not self._pending

    def _checked(self, handle):
        if isinstance(handle, bool) or not isinstance(handle, int):
            raise TypeError(f"handle must be an int returned by an *_async call, got {type(handle).__name__}")
        if handle not in self._pending:
            raise ValueError(f"unknown handle {handle}: it was never issued or was already synchronized")
        return handle
