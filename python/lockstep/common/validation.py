"""Converting the arguments of ops to the core's types, with errors that say what to fix.

TypeError for a wrong kind of value, ValueError for a right kind the core's type cannot
hold. Whether a value is right for the op (a root rank among the ranks, splits that add
up, a reduce op the op and dtype support...) is the core's check, made on every op;
check_op makes it early, for frontends that must refuse an op before it runs.
"""

import math
import numbers
import operator

from lockstep import _core


def as_int(value, what):
    """`value` as a Python int; accepts ints and numpy integers, not bools."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, got bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {type(value).__name__}") from None


def as_scale_factor(value, what):
    """A finite real scale factor as a float."""
    if type(value) is float and math.isfinite(value):  # the common case, checked cheaply
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value}")
    return value


def check_name(name):
    """None (an automatic name will be used) or a non-empty str."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")
    if not name:
        raise ValueError("name must be a non-empty string (or None for an automatic name)")
    return name


def check_compressor(compression):
    """A compressor (Horovod's interface: compress(tensor) -> (tensor, context) and
    decompress(tensor, context) -> tensor), or None for no compression."""
    if compression is None:
        return None
    if not (callable(getattr(compression, "compress", None)) and callable(getattr(compression, "decompress", None))):
        raise TypeError(
            f"compression must be a compressor such as Compression.fp16 (with compress() and "
            f"decompress()), got {type(compression).__name__}"
        )
    return compression


_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _as_fixed_int(value, what, bounds, bits):
    """`value` as an int the core's type for it holds."""
    value = as_int(value, what)
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{what} {value} is out of range: it must fit a {bits}-bit integer")
    return value


def as_root_rank(root_rank):
    """root_rank as the core takes it; whether it names a rank is the core's check."""
    return _as_fixed_int(root_rank, "root_rank", _INT32, 32)


def as_splits(splits):
    """Alltoall splits as a list of ints the core takes (an empty one: an equal split,
    as in Horovod); their count, signs and sum are the core's checks."""
    if isinstance(splits, (str, bytes)) or not hasattr(splits, "__iter__"):
        raise TypeError(f"splits must be a sequence of ints, got {type(splits).__name__}")
    if getattr(splits, "ndim", 1) != 1:
        raise ValueError(f"splits must be one-dimensional, got {splits.ndim} dimensions")
    return [_as_fixed_int(count, "each entry of splits", _INT64, 64) for count in splits]


def core_dtype(name):
    """The core's DataType of a framework dtype named `name` ("float32", "bool", ...;
    TensorFlow's, JAX's and NumPy's names are the core's), None for a dtype the core
    does not take (refused where the tensor is read)."""
    return _core.DataType.__members__.get(str(name).upper())


def check_op(
    op_type,
    shape=(),
    dtype=None,
    *,
    reduce_op=None,
    prescale=1.0,
    postscale=1.0,
    root_rank=0,
    splits=(),
    ps=0,
    name=None,
):
    """Check an op's argument values with the core's own checks, the ones Submit and Run
    make on every op (csrc/submit/spec_validation.cc), for a frontend that must refuse
    the op before any rank runs it: a TensorFlow graph being built, a JAX function being
    traced, a multi-step broadcast. Arguments are already converted: `op_type` a
    _core.OpType, `dtype` a _core.DataType (None: one any check accepts), `reduce_op` a
    _core.ReduceOp, `root_rank` an int (a global rank), `splits` ints, `ps` the process
    set's id. `shape`: a sequence of ints, None for a dimension not known yet; None
    where even the rank is not known. Raises the core's error, the type Horovod raises
    (InvalidArgumentError, UnsupportedOperationError: ValueErrors;
    UnimplementedError: a NotImplementedError)."""
    from lockstep.common import basics  # noqa: PLC0415 - basics imports this module's importers
    from lockstep.common.process_sets import process_set_size  # noqa: PLC0415

    spec = _core.OpSpec()
    spec.op = op_type
    spec.name = name or ""
    spec.dtype = _core.DataType.FLOAT32 if dtype is None else dtype
    spec.shape = [] if shape is None else [-1 if dim is None else int(dim) for dim in shape]
    if reduce_op is not None:
        spec.reduce_op = reduce_op
    spec.prescale = prescale
    spec.postscale = postscale
    spec.root_rank = root_rank
    spec.splits = list(splits)
    spec.process_set_id = ps
    world_size = basics.size()  # first: NotInitializedError before init, as every op raises
    _core.check_op_arguments(spec, process_set_size(ps), world_size, shape is not None)


def check_root_rank(root_rank):
    """root_rank converted and checked (the core's check) before any rank runs: for a
    frontend that acts on it before the broadcast (several broadcasts, a root's own
    work)."""
    root_rank = as_root_rank(root_rank)
    check_op(_core.OpType.BROADCAST, root_rank=root_rank)
    return root_rank
