"""Broadcasting variables from one rank, so every rank starts from the same state."""

import tensorflow as tf

from lockstep.common import basics, validation
from lockstep.tensorflow import host_ops, op_builder
from lockstep.tensorflow.tensors import as_tensor


def broadcast_variables(variables, root_rank, name=None):
    """Assign root_rank's value to each variable on every rank.

    All broadcasts are in flight together. Eagerly this returns None once done;
    in a graph it returns the op that does it.
    """
    variables = list(variables)
    root_rank = validation.check_root_rank(root_rank, basics.size())
    if not variables:
        return None if tf.executing_eagerly() else tf.no_op()
    values = [as_tensor(variable, f"variable {variable.name}") for variable in variables]
    received = op_builder.run(
        "BroadcastVariables",
        lambda resolved: host_ops.Broadcast(root_rank, resolved),
        values,
        [value.dtype for value in values],
        [value.shape for value in values],
        name,
    )
    assignments = [variable.assign(value) for variable, value in zip(variables, received)]
    return None if tf.executing_eagerly() else tf.group(*assignments)


def broadcast_global_variables(root_rank):
    """broadcast_variables over tf.compat.v1.global_variables() (TF1 graphs)."""
    if tf.executing_eagerly():
        raise RuntimeError(
            "broadcast_global_variables needs a tf.compat.v1 graph (there are no global variables in "
            "eager mode); use broadcast_variables(model.variables, root_rank) instead"
        )
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)
