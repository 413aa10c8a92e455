"""Broadcasting variables from one rank, so every rank starts from the same state."""

import tensorflow as tf

from lockstep.common import validation
from lockstep.common.process_sets import process_set_id
from lockstep.tensorflow.naming import collective
from lockstep.tensorflow.op_library import OPS
from lockstep.tensorflow.tensors import as_tensor


def broadcast_into(variables, root_rank, name=None, process_set=None):
    """Assign root_rank's value to each variable; all broadcasts are in flight together.

    Returns the variables eagerly, and the assigned values in a graph.
    """
    set_id = 0 if process_set is None else process_set_id(process_set)
    variables = list(variables)
    root_rank = validation.check_root_rank(root_rank)
    assignments = []
    for index, variable in enumerate(variables):
        value = as_tensor(variable, f"variable {getattr(variable, 'name', index)}")
        member = name if name is None or len(variables) == 1 else f"{name}.{index}"
        received = collective(
            "BroadcastVariable",
            member,
            lambda tensor_name, value=value: OPS.lockstep_broadcast(
                value, root_rank=root_rank, tensor_name=tensor_name, process_set_id=set_id
            ),
        )
        assignments.append(variable.assign(received))
    return variables if tf.executing_eagerly() else assignments


def broadcast_variables(variables, root_rank, name=None, process_set=None):
    """Assign root_rank's value to each variable on every rank (of the set).

    Eagerly this returns None once done; in a graph it returns the op that does it.
    """
    variables = list(variables)
    if not variables:
        return None if tf.executing_eagerly() else tf.no_op()
    assignments = broadcast_into(variables, root_rank, name, process_set)
    return None if tf.executing_eagerly() else tf.group(*assignments)


def broadcast_global_variables(root_rank):
    """broadcast_variables over tf.compat.v1.global_variables() (TF1 graphs)."""
    if tf.executing_eagerly():
        raise RuntimeError(
            "broadcast_global_variables needs a tf.compat.v1 graph (there are no global variables in "
            "eager mode); use broadcast_variables(model.variables, root_rank) instead"
        )
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)
