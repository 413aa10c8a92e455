"""lockstep: Horovod-style synchronous data-parallel training on MPI.

Frontends live in submodules (lockstep.numpy, lockstep.torch, ...); this package
holds what they share: life cycle, topology, reduce-op constants and exceptions.
Those names load on first use, so the launcher (lockstep.launcher) imports without the
compiled core and can report a broken build instead of failing on it.
"""

import importlib
import importlib.util

__version__ = "0.1.0"


def __getattr__(name):
    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        # Submodules (`from lockstep import _core`, `from . import launcher`) are asked
        # for here before they are imported; answering through the API would import the
        # compiled core, circularly or where it is broken.
        raise AttributeError(f"module 'lockstep' has no attribute {name!r}")
    api = importlib.import_module("lockstep.common.api")
    if name not in dir(api):
        raise AttributeError(f"module 'lockstep' has no attribute {name!r}")
    value = getattr(api, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(dir(importlib.import_module("lockstep.common.api"))))
