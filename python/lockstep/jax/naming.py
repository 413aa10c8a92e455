"""Names for collectives inside traced (jitted) code.

Ranks match collectives by name, and XLA may run independent collectives in a
different order on each rank, so a run-time counter would pair the wrong tensors.
Names are fixed when the function is traced instead: a user name as given, else
"jax.<kind>.<file>:<line>.<n>", where file:line is the user's call site and n counts
the traces of that call site in this process. Every rank runs the same program and
traces the same functions for the same (global) shapes, so the names agree; they
stay the same for every execution of a compiled function, so the core's response
cache serves repeated steps.

Eager calls on GPU arrays (device_arrays) take the same custom call, dispatched
eagerly: they are named "jax.<kind>.<file>:<line>.eager", the same at every call, so
jax compiles the call once per call site and shape instead of once per call. Eager
calls run one after another (the CUDA handler returns only once its collective was
negotiated), so a name is never in flight twice.
"""

import collections
import os
import sys

import jax

from lockstep.common import validation

_PACKAGE_DIRS = tuple(
    os.path.dirname(os.path.abspath(sys.modules[name].__file__)) + os.sep
    for name in ("lockstep", "jax", "jaxlib") if name in sys.modules
)
_TRACE_COUNTS = collections.Counter()


def traced_name(kind, name):
    """The negotiation name for a collective being traced."""
    name = validation.check_name(name)
    if name is not None:
        return name
    site = _call_site()
    if not _tracing():
        return f"jax.{kind}.{site}.eager"
    key = (kind, site)
    index = _TRACE_COUNTS[key]
    _TRACE_COUNTS[key] += 1
    return f"jax.{kind}.{site}.{index}"


def _call_site():
    """file:line of the innermost frame outside lockstep and JAX (the user's code)."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(_PACKAGE_DIRS) and not path.startswith("<"):
            return f"{os.path.basename(path)}:{frame.f_lineno}"
        frame = frame.f_back
    return "unknown"


def _tracing():
    """Whether JAX is tracing (jit, grad...), as opposed to dispatching eagerly."""
    from jax._src import core  # no public equivalent; without it every call counts as traced

    clean = getattr(core, "trace_state_clean", None)
    return clean is None or not clean()
