"""lockstep.tensorflow in graphs: independent collectives of one tf.function are
fused by the core (read from the timeline), join/barrier, variable broadcasts,
TF1 sessions with BroadcastGlobalVariablesHook, and errors."""

import os
import tempfile

import numpy as np
import tensorflow as tf
from rank_checks import assert_equal, expect_error
from timeline_checks import fused_share, read_timeline

import lockstep.tensorflow as hvd

INDEPENDENT_ALLREDUCES, FUSION_RUNS = 8, 10


def check_independent_allreduces_fuse(rank, size):
    @tf.function
    def eight_allreduces(tensors):
        return [hvd.allreduce(t, op=hvd.Sum) for t in tensors]

    tensors = [tf.fill([64], float(rank + i)) for i in range(INDEPENDENT_ALLREDUCES)]
    eight_allreduces(tensors)  # trace outside the recorded window
    path = os.path.join(tempfile.gettempdir(), f"lockstep_tf_fusion_{os.getpid()}.json")
    hvd.start_timeline(path)
    for _ in range(FUSION_RUNS):
        outputs = eight_allreduces(tensors)
    hvd.stop_timeline()
    for i, output in enumerate(outputs):
        assert_equal(output.numpy(), np.full(64, sum(r + i for r in range(size)), np.float32), f"allreduce {i}")
    if rank != 0:
        return None  # only rank 0 writes the timeline; fusion decisions are the same everywhere
    share, launches = fused_share(read_timeline(path), "eight_allreduces/LockstepAllreduce")
    os.remove(path)
    assert launches == INDEPENDENT_ALLREDUCES * FUSION_RUNS, f"timeline shows {launches} allreduces"
    # Run one after another, none would be fused; typically about 3/4 are.
    assert share >= 0.25, f"only {share:.0%} of independent allreduces in one tf.function were fused"
    return share


def check_join_and_barrier(rank, size):
    assert hvd.barrier() is None, "eager barrier returns None"
    last = hvd.join()
    assert 0 <= int(last.numpy()) < size, f"join returned {last}"

    @tf.function
    def join_in_graph():
        return hvd.join()

    @tf.function
    def reduce_after_barrier(x):
        with tf.control_dependencies([hvd.barrier()]):
            return hvd.allreduce(x, op=hvd.Sum)

    assert 0 <= int(join_in_graph().numpy()) < size, "join in tf.function"
    result = reduce_after_barrier(tf.constant([1.0]))
    assert_equal(result.numpy(), np.array([size], np.float32), "allreduce after a barrier in tf.function")


def check_broadcast_variables(rank, size):
    root = size - 1
    variables = [
        tf.Variable(np.full(3, rank, np.float32)),
        tf.Variable(np.array(rank, np.int64)),
        tf.Variable(np.full((2, 2), rank % 2 == 1)),
    ]
    hvd.broadcast_variables(variables, root_rank=root)
    assert_equal(variables[0].numpy(), np.full(3, root, np.float32), "eager broadcast_variables float")
    assert_equal(np.asarray(variables[1].numpy()), np.array(root, np.int64), "eager broadcast_variables int64")
    assert_equal(variables[2].numpy(), np.full((2, 2), root % 2 == 1), "eager broadcast_variables bool")
    variables[0].assign(np.full(3, 10.0 * rank, np.float32))

    @tf.function
    def broadcast_in_graph():
        hvd.broadcast_variables(variables[:1], root_rank=0)  # the assignments run without being returned

    broadcast_in_graph()
    assert_equal(variables[0].numpy(), np.zeros(3, np.float32), "broadcast_variables in tf.function")


def check_tf1_session_hook(rank, size):
    """Horovod's TF1 pattern: MonitoredTrainingSession + BroadcastGlobalVariablesHook."""
    root = size - 1
    with tf.Graph().as_default():
        weights = tf.compat.v1.get_variable("weights", initializer=np.full(4, rank + 1.0, np.float32))
        counter = tf.compat.v1.get_variable("counter", initializer=np.int32(rank))
        summed = hvd.allreduce(weights, op=hvd.Sum)
        hooks = [hvd.BroadcastGlobalVariablesHook(root)]
        with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as session:
            assert_equal(session.run(weights), np.full(4, root + 1.0, np.float32), "hook broadcast weights")
            assert_equal(np.asarray(session.run(counter)), np.array(root, np.int32), "hook broadcast counter")
            assert_equal(session.run(summed), np.full(4, size * (root + 1.0), np.float32), "allreduce in TF1 graph")


def check_errors(rank, size):
    odd = rank % 2 == 1
    # Mismatches across ranks: Horovod's TensorFlow type, on every rank, naming the
    # tensor, the ranks and the values.
    error = expect_error(
        tf.errors.FailedPreconditionError,
        ["shape", "rank 0", "[3]", "[4]"],
        hvd.allreduce,
        tf.ones([4 if odd else 3]),
        name="tf.mismatch.eager",
    )
    assert "tf.mismatch.eager" in str(error), f"the error names the tensor: {error}"

    @tf.function
    def mismatched():
        return hvd.allreduce(tf.ones([4 if odd else 3]), name="tf.mismatch.graph")

    expect_error(tf.errors.FailedPreconditionError, ["tf.mismatch.graph", "shape"], mismatched)
    assert_equal(
        hvd.allreduce(tf.constant([1.0]), op=hvd.Sum).numpy(),
        np.array([size], np.float32),
        "collectives keep working after errors",
    )
    expect_error(
        RuntimeError, ["XLA", "jit_compile=False"], tf.function(lambda: hvd.allreduce(tf.ones([2])), jit_compile=True)
    )
    expect_error(TypeError, ["uint32", "supported"], hvd.allreduce, tf.constant([1], tf.uint32))
    expect_error(TypeError, ["complex64"], hvd.allgather, tf.constant([1j], tf.complex64))
    expect_error(ValueError, ["reducescatter", "Min"], hvd.reducescatter, tf.ones([2, 2]), op=hvd.Min)
    expect_error(ValueError, ["reducescatter", "Min"], tf.function(lambda: hvd.reducescatter(tf.ones([2]), op=hvd.Min)))
    expect_error(ValueError, ["Average", "bool"], hvd.allreduce, tf.constant([True]))
    expect_error(ValueError, ["root_rank"], hvd.broadcast, tf.ones([1]), root_rank=size)
    expect_error(ValueError, ["dimension"], hvd.allgather, tf.constant(1.0))
    slices = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0]), tf.constant([3, 2]))
    expect_error(NotImplementedError, ["Only Sum and Average"], hvd.allreduce, slices, op=hvd.Max)
    expect_error(NotImplementedError, ["Pre/postscale"], hvd.allreduce, slices, prescale_factor=2.0)
    expect_error(NotImplementedError, ["Adasum"], hvd.allreduce, slices, op=hvd.Adasum)
