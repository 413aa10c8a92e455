"""lockstep: Horovod-style synchronous data-parallel training on MPI.

Frontends live in submodules (lockstep.numpy, lockstep.torch, ...); this package
holds what they share: life cycle, topology, reduce-op constants and exceptions.
Those names load on first use, so the launcher (lockstep.run) imports without the
compiled core and can report a broken build instead of failing on it.
"""

import importlib

__version__ = "0.1.0"


def __getattr__(name):
    api = importlib.import_module("lockstep.common.api")
    if name.startswith("__") or name not in dir(api):
        raise AttributeError(f"module 'lockstep' has no attribute {name!r}")
    value = getattr(api, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(dir(importlib.import_module("lockstep.common.api"))))
