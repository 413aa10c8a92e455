"""Frontend-independent argument checks with errors that say what to fix.

TypeError for a wrong kind of value, ValueError for a right kind with a bad value.
"""

import math
import numbers
import operator

from lockstep.common.exceptions import InvalidArgumentError


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


def check_root_rank(root_rank, world_size):
    root_rank = as_int(root_rank, "root_rank")
    if not 0 <= root_rank < world_size:
        raise ValueError(f"root_rank {root_rank} is out of range: there are {world_size} ranks (0..{world_size - 1})")
    return root_rank


def check_has_first_dim(shape, op_name):
    # Horovod refuses scalars with a ValueError in some frontends and a RuntimeError
    # in others; InvalidArgumentError is both.
    if len(shape) == 0:
        raise InvalidArgumentError(f"{op_name} needs a tensor with at least one dimension, got a 0-d tensor")


def check_splits(splits, world_size, rows):
    """Alltoall splits: one non-negative row count per rank, summing to `rows`."""
    if isinstance(splits, (str, bytes)) or not hasattr(splits, "__iter__"):
        raise TypeError(f"splits must be a sequence of ints, got {type(splits).__name__}")
    if getattr(splits, "ndim", 1) != 1:
        raise ValueError(f"splits must be one-dimensional, got {splits.ndim} dimensions")
    counts = [as_int(count, "each entry of splits") for count in splits]
    if len(counts) != world_size:
        raise ValueError(f"splits has {len(counts)} entries but there are {world_size} ranks; give one per rank")
    if any(count < 0 for count in counts):
        raise ValueError(f"splits must be non-negative, got {counts}")
    if sum(counts) != rows:
        raise ValueError(f"splits {counts} sum to {sum(counts)} but the tensor's first dimension is {rows}")
    return counts


def check_even_split(rows, world_size):
    """Alltoall without splits sends an equal share of the first dimension to each rank."""
    if rows % world_size != 0:
        raise ValueError(
            f"alltoall without splits needs a first dimension divisible by the number of ranks "
            f"({world_size}), got {rows}; pass splits= for an uneven split"
        )
