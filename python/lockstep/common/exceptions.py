"""Exception types shared by every frontend.

The core raises LockstepError (a RuntimeError) or one of its subclasses, chosen by
the kind of failure so that code written against Horovod catches what it expects:

  InvalidArgumentError  also a ValueError: a bad argument the core detects, e.g. a
                        name submitted again while its collective is in flight
  UnsupportedOperationError  also a ValueError: a reduce op the op does not support
  UnimplementedError    also a NotImplementedError: e.g. Adasum on 3 ranks
  PreconditionError     the ranks disagree about a collective
  AbortedError          a collective failed, or did not run (shutdown, a rank left)
"""

from lockstep import _core

LockstepError = _core.LockstepError
InvalidArgumentError = _core.InvalidArgumentError
PreconditionError = _core.PreconditionError
AbortedError = _core.AbortedError
# A reduce op or argument combination the op does not support. Horovod reports some of
# these from its core (a RuntimeError) and some from Python (a ValueError); this is
# both, so either `except` clause catches it.
UnsupportedOperationError = _core.UnsupportedOperationError
# What Horovod refuses with NotImplementedError (Adasum on a number of ranks that is not
# a power of 2); also a LockstepError, as the core raises it.
UnimplementedError = _core.UnimplementedError

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


class OptimizerUsageError(RuntimeError, AssertionError):
    """A DistributedOptimizer used out of order (zero_grad() while gradients are being
    reduced, too many backward passes before step()). Horovod raises AssertionError
    there; this is also a RuntimeError, what lockstep raised before."""


def _keep_type_inside_tf_function(cls):
    """TensorFlow's autograph re-raises an error from a traced function with its own
    type only if that type's __init__ is Exception's (or it is a builtin error);
    anything else becomes a StagingError that `except ValueError` misses. These
    classes initialize exactly as Exception does, so say so."""
    cls.__init__ = Exception.__init__
    return cls


for _cls in (
    LockstepError,
    InvalidArgumentError,
    PreconditionError,
    AbortedError,
    UnsupportedOperationError,
    UnimplementedError,
):
    _keep_type_inside_tf_function(_cls)
