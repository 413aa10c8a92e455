"""Automatic names for ops the user did not name: the one place Python chooses them.

Ranks match tensors by name, so an unnamed op must get the same name on every rank.
Every name chosen here is "<kind>.<family>.<call site>.<n>", the call site being
the file and line of the user's code that called lockstep; the family and what n
counts depend on when the op's name is fixed:

- Eager ops (OpNamer, family "auto", every frontend's asynchronous and synchronous
  calls): the unnamed ops of that kind from that site since this process last had no op in
  flight. Every rank submits its unnamed ops and waits for its handles in the same
  order, so the names agree.
- Traced ops (TraceNamer, family "trace", JAX inside jit): the traces of that call site in this
  process. XLA may run independent collectives in a different order on each rank,
  so a run-time count could pair the wrong tensors; every rank traces the same
  functions the same number of times, so trace counts agree. Eager JAX calls on GPU
  arrays take the compiled path too and are named "<kind>.trace.<site>.eager", the
  same at every call, so jax compiles them once per site and shape. The families
  differ because a compiled step may still be running (JAX dispatches
  asynchronously) when an eager call from the same line submits its op.

Why call sites and restarts: the core's response cache serves a name it has seen
with the same parameters through one bit per cycle instead of a negotiation.
Restarting the counts whenever nothing is in flight (for a synchronous op, after
every call) makes each pass of a loop submit the same names, and the call site keeps
two different ops of one kind (a loss and a metric, say) from taking turns with one
name and evicting each other from the cache. A name is reused only after the op
that held it finished, so no two ops in flight share one. Traced names never
change between executions of a compiled function, so repeated steps hit the cache.

Two kinds of names are not chosen here, for reasons of their frameworks: TensorFlow
graph ops are named after their graph-unique name scope (tensorflow/naming.py),
which TensorFlow keeps stable across retraces; eager TensorFlow kernels, whose name
must be a constant attribute so the kernel is built once, take the core's counter
("<kind>.noname.<n>") when they run. No two families can collide.
"""

import itertools
import os
import sys
import threading
from collections import Counter

# Module-name prefixes of frames that are never the user's call site.
LOCKSTEP_FRAMES = ("lockstep.",)


# Per (skip, skip_generated): id(code object) -> (code, "file.py:" for a user frame or
# None for a skipped one). Resolving a frame's module and base name costs more than
# the rest of a small op's naming, and a code object never changes module or file.
# Keyed by id because hashing a code object hashes its whole body; the entry holds
# the code object, so no other one can take that id while it is cached.
_SITE_PREFIXES = {}


def call_site(skip=LOCKSTEP_FRAMES, skip_generated=False):
    """ "file.py:line" of the innermost caller whose module name starts with none of
    `skip` (and, with skip_generated, whose code is not generated, "<string>" etc.)."""
    prefixes = _SITE_PREFIXES.get((skip, skip_generated))
    if prefixes is None:
        prefixes = _SITE_PREFIXES.setdefault((skip, skip_generated), {})
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        entry = prefixes.get(id(code))
        if entry is None:
            module = frame.f_globals.get("__name__", "")
            generated = skip_generated and code.co_filename.startswith("<")
            # The base name only: ranks may run the same script from different paths.
            prefix = None if module.startswith(skip) or generated else os.path.basename(code.co_filename) + ":"
            entry = prefixes.setdefault(id(code), (code, prefix))
        if entry[1] is not None:
            return entry[1] + str(frame.f_lineno)
        frame = frame.f_back
    return "unknown"


class OpNamer:
    """Names of eager ops: counted per call site while ops are in flight."""

    def __init__(self):
        # key -> itertools.count. Public so that the per-op path can skip restart()
        # while it is empty, as it stays for named ops.
        self.counters = {}

    def name_for(self, kind, name, process_set_id=0):
        """`name` if given, else the next automatic name for `kind` from the caller's
        call site, e.g. "allreduce.auto.train.py:42.0". Each process set counts on its
        own (its names are negotiated among its members only)."""
        if name is not None:
            return name
        prefix = kind + ".auto." + call_site()
        key = prefix if process_set_id == 0 else (process_set_id, prefix)
        # No lock: under the GIL, setdefault and next() on a counter are atomic.
        counter = self.counters.get(key)
        if counter is None:
            counter = self.counters.setdefault(key, itertools.count())
        return prefix + "." + str(next(counter))

    def restart(self):
        """Called when no op is in flight: every call site counts from 0 again."""
        if self.counters:  # named ops leave it empty
            self.counters.clear()


class TraceNamer:
    """Names of ops in traced programs: counted per call site and trace."""

    def __init__(self, skip):
        self._skip = skip  # the tracing framework's own frames sit between user and lockstep
        self._lock = threading.Lock()
        self._traces = Counter()

    def name_for(self, kind, name, tracing):
        """`name` if given, else "<kind>.trace.<site>.<n>" while tracing (n: this site's
        traces so far) or "<kind>.trace.<site>.eager" for an eager call."""
        if name is not None:
            return name
        site = call_site(self._skip, skip_generated=True)
        if not tracing:
            return f"{kind}.trace.{site}.eager"
        with self._lock:
            index = self._traces[(kind, site)]
            self._traces[(kind, site)] += 1
        return f"{kind}.trace.{site}.{index}"
