"""Reduce-op constants and the argument handling every frontend shares.

The constants are plain ints with Horovod's values, so scripts that pass raw
ints or compare against hvd.Sum keep working.
"""

import warnings

from lockstep import _core
from lockstep.common.exceptions import UnsupportedOperationError
from lockstep.common.validation import as_int, as_scale_factor

Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_CORE_REDUCE_OPS = {
    Average: _core.ReduceOp.AVERAGE,
    Sum: _core.ReduceOp.SUM,
    Adasum: _core.ReduceOp.ADASUM,
    Min: _core.ReduceOp.MIN,
    Max: _core.ReduceOp.MAX,
    Product: _core.ReduceOp.PRODUCT,
}

# Every reduce op; which of them an op, a dtype and a set size allow is the core's
# check (validation.check_op).
ALLREDUCE_OPS = (Average, Sum, Adasum, Min, Max, Product)
# Linear reductions: their gradient is the same reduction of the cotangents, and
# they are what gradient averaging (optimizers, tapes, sparse gathers) accepts.
LINEAR_OPS = (Average, Sum)

# The core's own texts (include/lockstep/values.h), which it raises for bool tensors.
BOOL_AVERAGE_ERROR = _core.BOOL_AVERAGE_ERROR
BOOL_SCALE_ERROR = _core.BOOL_SCALE_ERROR

REDUCE_OP_NAMES = {
    Average: "Average",
    Sum: "Sum",
    Adasum: "Adasum",
    Min: "Min",
    Max: "Max",
    Product: "Product",
}


def handle_average_backwards_compatibility(op, average):
    """Resolve the deprecated `average=` argument against `op=`.

    Returns the reduce op to use: `op` if given, else Average/Sum from `average`,
    else Average (Horovod's default).
    """
    if op is not None:
        if average is not None:
            raise ValueError("pass either op= or the deprecated average=, not both")
        return op
    if average is None:
        return Average
    warnings.warn(
        "average= is deprecated; pass op=Average or op=Sum instead",
        DeprecationWarning,
        stacklevel=3,
    )
    return Average if average else Sum


def to_core_reduce_op(op, allowed=tuple(REDUCE_OP_NAMES), op_kind="this op"):
    """Map a reduce-op constant (int or core enum) to the core enum for `op_kind`.

    TypeError for non-ints; ValueError for unknown ops; UnsupportedOperationError
    (a ValueError and a RuntimeError, which Horovod raises from its core) for ops
    outside `allowed`.
    """
    if type(op) is int and op in allowed:  # the common case, checked cheaply
        return _CORE_REDUCE_OPS[op]
    if isinstance(op, _core.ReduceOp):
        op = int(op)
    op = as_int(op, "op (a reduce-op constant such as hvd.Sum)")
    if op not in REDUCE_OP_NAMES:
        raise ValueError(f"unknown reduce op {op}; use one of {_describe(REDUCE_OP_NAMES)}")
    if op not in allowed:
        names = {value: REDUCE_OP_NAMES[value] for value in allowed}
        raise UnsupportedOperationError(
            f"{op_kind} does not support reduce op {REDUCE_OP_NAMES[op]}; use one of {_describe(names)}"
        )
    return _CORE_REDUCE_OPS[op]


def check_linear_op(op, what):
    """`op` as an int if it is Average or Sum, the reductions `what` (a gradient
    reduction) accepts; UnsupportedOperationError (a ValueError) otherwise."""
    return int(to_core_reduce_op(op, LINEAR_OPS, what))


def reduction_args(op, prescale, postscale, op_kind="this op"):
    """(core reduce op, prescale, postscale) of a reduction, converted to the core's
    types: TypeError or ValueError for what is not a reduce op or a finite real factor.
    Whether the op, its dtype and its process set allow them is the core's check."""
    reduce_op = to_core_reduce_op(op, op_kind=op_kind)
    return reduce_op, as_scale_factor(prescale, "prescale_factor"), as_scale_factor(postscale, "postscale_factor")


def _describe(names):
    return ", ".join(f"{name} ({value})" for value, name in names.items())


def predivided_scaling(op, gradient_predivide_factor):
    """(prescale, postscale) for a gradient reduction with a predivide factor f:
    divide by f before the sum and multiply by f after it (Average then divides by
    the world size), which keeps low-precision sums in range. Shared by every
    frontend's DistributedOptimizer and gradient tape."""
    factor = as_scale_factor(gradient_predivide_factor, "gradient_predivide_factor")
    if factor <= 0.0:
        raise ValueError(f"gradient_predivide_factor must be > 0, got {factor}")
    if factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor applies to op=Average only")
    return 1.0 / factor, factor
