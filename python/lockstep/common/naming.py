"""Automatic names for ops the user did not name.

Ranks match tensors by name, so an unnamed op must get the same name on every
rank. The counters live in the core (one per op kind, restarted when a join
completes), shared by every frontend and by the TensorFlow kernels, so unnamed
ops from numpy, torch and TensorFlow in one script never collide.
"""

from lockstep import _core


class OpNamer:
    def name_for(self, kind, name, process_set_id=0):
        """`name` if given, else the next automatic name for `kind`, e.g. "allreduce.noname.3"
        (each process set counts on its own)."""
        if name is not None:
            return name
        return _core.auto_name(kind, process_set_id)
