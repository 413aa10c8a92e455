"""Automatic names for ops the user did not name.

Ranks match tensors by name, so an unnamed op must get the same name on every rank:
"<kind>.auto.<call site>.<n>", the call site being the file and line of the first
caller outside lockstep, and n counting the unnamed ops of that kind from that site
since this process last had no op in flight. Every rank runs the same program, so
every rank submits its unnamed ops and waits for its handles in the same order, and
the names agree.

Why call sites and restarts: the core's response cache serves a name it has seen
with the same parameters through one bit per cycle instead of a negotiation.
Restarting the counts whenever nothing is in flight (for a synchronous op, after
every call) makes each pass of a loop submit the same names, and the call site keeps
two different ops of one kind (a loss and a metric, say) from taking turns with one
name and evicting each other from the cache. A name is reused only after the op
that held it finished, so no two ops in flight share one.

The TensorFlow kernels, which finish through callbacks rather than handles, name
their unnamed ops with the core's own counters ("<kind>.noname.<n>"); the two
families of names cannot collide.
"""

import os
import sys
import threading


def _call_site():
    """"file.py:line" of the innermost caller outside the lockstep package."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("lockstep."):
        frame = frame.f_back
    if frame is None:
        return "unknown"
    # The base name only: ranks may run the same script from different paths.
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


class OpNamer:
    def __init__(self):
        self._lock = threading.Lock()
        self._counters = {}

    def name_for(self, kind, name, process_set_id=0):
        """`name` if given, else the next automatic name for `kind` from the caller's
        call site, e.g. "allreduce.auto.train.py:42.0". Each process set counts on its
        own (its names are negotiated among its members only)."""
        if name is not None:
            return name
        prefix = f"{kind}.auto.{_call_site()}"
        key = (process_set_id, prefix)
        with self._lock:
            index = self._counters.get(key, 0)
            self._counters[key] = index + 1
        return f"{prefix}.{index}"

    def restart(self):
        """Called when no op is in flight: every call site counts from 0 again."""
        with self._lock:
            self._counters.clear()
