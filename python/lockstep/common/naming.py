"""Deterministic automatic names for ops the user did not name.

Ranks match tensors by name, so an unnamed op must get the same name on every
rank. Every rank submits its unnamed ops of one kind in the same order, so a
counter per op kind gives matching names.
"""

import threading


class OpNamer:
    def __init__(self):
        self._lock = threading.Lock()
        self._counters = {}
        self._generation = 0

    def name_for(self, kind, name):
        """`name` if given, else the next automatic name for `kind`, e.g. "allreduce.noname.3"."""
        if name is not None:
            return name
        with self._lock:
            index = self._counters.get(kind, 0)
            self._counters[kind] = index + 1
            generation = self._generation
        if generation == 0:
            return f"{kind}.noname.{index}"
        return f"{kind}.noname.{generation}.{index}"

    def start_new_generation(self):
        """Restart the counters after a join.

        Ranks that joined early submitted fewer unnamed ops than the others, so their
        counters disagree afterwards. A join completes at the same logical point on
        every rank, so restarting there realigns them; the generation keeps the new
        names distinct from any earlier ones still in flight.
        """
        with self._lock:
            self._counters.clear()
            self._generation += 1
