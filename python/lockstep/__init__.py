"""lockstep: Horovod-style synchronous data-parallel training on MPI.

Frontends live in submodules (lockstep.numpy, lockstep.torch); this package holds
what they share: life cycle, topology, reduce-op constants and exceptions.
"""

from lockstep.common.api import *  # noqa: F401,F403 (the shared public names)

__version__ = "0.1.0"
