"""The one dispatcher per process that every frontend submits through.

The core is process-wide, and a single namer keeps unnamed ops from different
frontends (numpy and torch in one script) from getting the same name.
"""

from lockstep import _core
from lockstep.common.dispatch import OpDispatcher
from lockstep.common.handles import HandleTable
from lockstep.common.naming import OpNamer

NAMER = OpNamer()
DISPATCHER = OpDispatcher(_core, NAMER, HandleTable())
