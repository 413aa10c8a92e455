"""lockstep: Horovod-style synchronous data-parallel training on MPI.

Frontends live in submodules (lockstep.numpy, lockstep.torch, ...); this package
holds what they share: life cycle, topology, reduce-op constants and exceptions.
Those names load on first use, so the launcher (lockstep.run) imports without the
compiled core and can report a broken build instead of failing on it.
"""

import importlib

__version__ = "0.1.0"


def __getattr__(name):
    if name.startswith("_"):
        # Private names are submodules (`from lockstep import _core` asks here before
        # importing it); answering through the API would import it circularly.
        raise AttributeError(f"module 'lockstep' has no attribute {name!r}")
    api = importlib.import_module("lockstep.common.api")
    if name not in dir(api):
        raise AttributeError(f"module 'lockstep' has no attribute {name!r}")
    value = getattr(api, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(dir(importlib.import_module("lockstep.common.api"))))
