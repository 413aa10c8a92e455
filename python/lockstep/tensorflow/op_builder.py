"""Runs a host collective (see host_ops) in whatever mode TensorFlow is in.

Eager: start and finish are called directly.

Inside tf.function: two stateful tf.numpy_function ops, a start (enqueue, returns
handles at once) and a finish (blocks in the core's wait with the GIL released).
Both are marked independent for automatic control dependencies, which otherwise
chain every stateful op in program order and would run one collective after
another. Independent collectives of one function can then all be enqueued
before any finish blocks, so the core negotiates and fuses them together;
graph_ordering adds the control edges that keep this deadlock-free and fused.

Plain (tf.compat.v1) graphs run only the subgraph a session fetches, so forcing
earlier starts to run there would be wrong; there each collective is a single op.

Names: eager ops get the core's automatic names (ranks issue them in the same
order). Graph ops are named when the graph is built, from the function graph's
name and the op's graph-unique name scope, so they match across ranks however
TensorFlow schedules the ops and however often a function is retraced.
"""

import tensorflow as tf
from tensorflow.python.ops import control_flow_util  # only to detect XLA compilation early

from lockstep.common import basics
from lockstep.tensorflow import host_ops
from lockstep.tensorflow.graph_ordering import collectives_of
from lockstep.tensorflow.tensors import eager_array, from_array


def run(kind, make_host_op, inputs, output_dtypes, output_shapes, name=None, finish=host_ops.finish):
    """Run the collective `make_host_op(resolved_name)` on `inputs` (tensors).

    kind: a CamelCase label for graph scopes, e.g. "Allreduce".
    output_dtypes/output_shapes: one per output; shapes may be partially known.
    finish: turns the handles into a list of arrays (or one array, for
    single-output finishers such as host_ops.finish_join).
    Returns a list of output tensors.
    """
    basics.require_initialized()  # while building a graph too, so the error is not deferred to a run
    if tf.executing_eagerly():
        return _run_eagerly(make_host_op(name), inputs, output_dtypes, finish)
    with tf.name_scope(f"Lockstep{kind}") as scope:
        graph = tf.compat.v1.get_default_graph()
        _refuse_xla(graph)
        host_op = make_host_op(name if name is not None else _graph_op_name(graph, scope))
        if graph.building_function:
            outputs = _start_and_finish_ops(graph, host_op, inputs, output_dtypes, finish)
        else:
            outputs = _single_op(host_op, inputs, output_dtypes, finish)
    for output, shape in zip(outputs, output_shapes):
        output.set_shape(shape)
    return outputs


def _refuse_xla(graph):
    if control_flow_util.GraphOrParentsInXlaContext(graph):
        raise RuntimeError(
            "lockstep collectives run on the host and cannot be compiled by XLA: use "
            "tf.function(jit_compile=False), or model.compile(..., jit_compile=False) in Keras "
            "(Keras turns XLA on by default when a GPU is visible)"
        )


def _run_eagerly(host_op, inputs, output_dtypes, finish):
    handles = host_op.start(*[eager_array(tensor) for tensor in inputs])
    arrays = _as_list(finish(handles))
    return [from_array(array, dtype) for array, dtype in zip(arrays, output_dtypes)]


def _start_and_finish_ops(graph, host_op, inputs, output_dtypes, finish):
    handles = tf.numpy_function(host_op.start, list(inputs), tf.int64, stateful=True, name="start")
    collectives = collectives_of(graph)
    collectives.add_start(handles.op)
    with tf.control_dependencies(collectives.starts):
        outputs = tf.numpy_function(finish, [handles], list(output_dtypes), stateful=True, name="finish")
    finish_op = outputs[0].op  # every output comes from the one finish op
    collectives.add_finish(finish_op)
    _mark_independent(graph, [handles.op, finish_op])
    return outputs


def _single_op(host_op, inputs, output_dtypes, finish):
    def start_and_finish(*arrays):
        return finish(host_op.start(*arrays))

    return tf.numpy_function(start_and_finish, list(inputs), list(output_dtypes), stateful=True, name="collective")


def _mark_independent(graph, ops):
    manager = getattr(graph, "experimental_acd_manager", None)
    if manager is None:
        return
    for op in ops:
        manager.run_independently(op)


def _graph_op_name(graph, scope):
    scope = scope.rstrip("/")
    graph_name = getattr(graph, "name", None)
    return f"{graph_name}/{scope}" if graph_name else scope


def _as_list(arrays):
    return list(arrays) if isinstance(arrays, (list, tuple)) else [arrays]
