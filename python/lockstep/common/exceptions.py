"""Exception types shared by every frontend."""

from lockstep import _core

# Raised by the core for any failure a user can cause (mismatch across ranks,
# stalls, shutdown with ops pending, bad arguments the core detects).
LockstepError = _core.LockstepError

# Ported Horovod scripts catch this name around their training loops.
HorovodInternalError = LockstepError

NOT_INITIALIZED_MESSAGE = "lockstep has not been initialized; call hvd.init() first"


class NotInitializedError(LockstepError, ValueError):
    """An op or query before init() or after shutdown().

    Also a ValueError because Horovod raises ValueError in this situation and
    ported code may catch that.
    """

    def __init__(self, message=None):
        super().__init__(message or NOT_INITIALIZED_MESSAGE)
