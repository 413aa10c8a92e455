"""Creating lockstep ops: their `tensor_name` (the name ranks negotiate by) and,
in tf.function, their independence from program order.

Names:

- A name the user gave is used as is.
- Eagerly, unnamed ops carry an empty name and the kernel takes the core's next
  automatic name when it runs (ranks run their eager ops in the same order). A
  fresh name per call would instead create a new cached kernel per call.
- In a graph, the name is fixed when the op is built: the function graph's name
  plus the op's graph-unique name scope, so it matches across ranks however
  TensorFlow schedules the ops and however often a function is retraced.
"""

import contextlib

import tensorflow as tf
from tensorflow.python.ops import control_flow_util  # only to detect XLA compilation early

from lockstep.common import basics, validation


def collective(kind, name, build):
    """`build(tensor_name)` creates the op (returning its outputs, or the op itself
    when it has none) inside op_scope; returns what it returned."""
    with op_scope(kind, name) as tensor_name:
        outputs = build(tensor_name)
    if not tf.executing_eagerly():
        _run_independently(outputs)
    return outputs


def _run_independently(outputs):
    op = outputs if isinstance(outputs, tf.Operation) else tf.nest.flatten(outputs)[0].op
    manager = getattr(op.graph, "experimental_acd_manager", None)  # only function graphs have one
    if manager is not None:
        manager.run_independently(op)


@contextlib.contextmanager
def op_scope(kind, name=None):
    """Create the op inside this scope; yields its tensor_name.

    kind: a CamelCase label for graph scopes, e.g. "Allreduce".
    """
    basics.require_initialized()  # while building a graph too, so the error is not deferred to a run
    name = validation.check_name(name)
    if tf.executing_eagerly():
        yield "" if name is None else name
        return
    with tf.name_scope(f"Lockstep{kind}") as scope:
        graph = tf.compat.v1.get_default_graph()
        _refuse_xla(graph)
        yield name if name is not None else _graph_op_name(graph, scope)


def _refuse_xla(graph):
    if control_flow_util.GraphOrParentsInXlaContext(graph):
        raise RuntimeError(
            "lockstep collectives run on the host and cannot be compiled by XLA: use "
            "tf.function(jit_compile=False), or model.compile(..., jit_compile=False) in Keras "
            "(Keras turns XLA on by default when a GPU is visible)"
        )


def _graph_op_name(graph, scope):
    scope = scope.rstrip("/")
    graph_name = getattr(graph, "name", None)
    return f"{graph_name}/{scope}" if graph_name else scope
