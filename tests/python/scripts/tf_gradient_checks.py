"""Gradients of lockstep.tensorflow's collectives, eagerly, in tf.function and in
a tf.compat.v1 Session graph (tf.compat.v1.gradients).

Every rank weights its loss by its own constant c_r = rank + 1, so dL/dy on rank r
is c_r everywhere and each expected gradient is a closed form in the c's:
Horovod's definitions (see lockstep/tensorflow/mpi_ops.py).
"""

import numpy as np
import tensorflow as tf
from rank_checks import assert_equal, expect_error

import lockstep.tensorflow as hvd


def weighted_loss_gradient(forward, x, rank):
    """d/dx of sum(forward(x) * (rank + 1)): eagerly, in a tf.function, in a Session."""

    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = forward(x)
            loss = tf.reduce_sum(y * float(rank + 1))
        return tape.gradient(loss, x)

    eager, function = gradient(tf.constant(x)).numpy(), tf.function(gradient)(tf.constant(x)).numpy()
    with tf.Graph().as_default():
        source = tf.constant(x)
        (session_gradient,) = tf.compat.v1.gradients(tf.reduce_sum(forward(source) * float(rank + 1)), [source])
        with tf.compat.v1.Session() as session:
            in_session = session.run(session_gradient)
    return eager, function, in_session


def check_gradient(what, forward, x, expected, rank):
    for mode, value in zip(("eager", "tf.function", "Session"), weighted_loss_gradient(forward, x, rank)):
        assert_equal(value, expected, f"{mode} gradient of {what}")


def check_collective_gradients(rank, size):
    weights = np.arange(1, size + 1, dtype=np.float32)  # every rank's c_r
    mean, total = weights.mean(), weights.sum()
    x = np.full((2, 3), rank, np.float32)
    check_gradient(
        "allreduce Sum prescale 2",
        lambda t: hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0),
        x,
        np.full((2, 3), 2 * total, np.float32),
        rank,
    )
    check_gradient("allreduce Average", lambda t: hvd.allreduce(t), x, np.full((2, 3), mean, np.float32), rank)
    check_gradient(
        "grouped_allreduce Sum",
        lambda t: hvd.grouped_allreduce([t, 2 * t], op=hvd.Sum)[1],
        x,
        np.full((2, 3), 2 * total, np.float32),
        rank,
    )
    gathered_row = np.zeros((2, 3), np.float32)
    gathered_row[0] = total
    check_gradient(
        "tf.gather of an allreduce (IndexedSlices gradient)",
        lambda t: tf.gather(hvd.allreduce(t, op=hvd.Sum), [0]),
        x,
        gathered_row,
        rank,
    )
    rows = np.full((rank + 1, 2), rank, np.float32)
    check_gradient("allgather", hvd.allgather, rows, np.full((rank + 1, 2), mean, np.float32), rank)
    check_gradient(
        "grouped_allgather",
        lambda t: hvd.grouped_allgather([t, 3 * t])[1],
        rows,
        np.full((rank + 1, 2), 3 * mean, np.float32),
        rank,
    )
    root = size - 1
    check_gradient(
        "broadcast",
        lambda t: hvd.broadcast(t, root),
        x,
        np.full((2, 3), mean if rank == root else 0.0, np.float32),
        rank,
    )
    check_alltoall_gradient(rank, size, weights)
    scattered = np.ones((2 * size, 2), np.float32)
    owner_weights = np.repeat(weights, 2)[:, None] * np.ones((1, 2), np.float32)
    # Horovod's definition: the allgather of the output gradients, times the size
    # for Sum, times the forward's scale factors.
    check_gradient(
        "reducescatter Sum", lambda t: hvd.reducescatter(t, op=hvd.Sum), scattered, owner_weights * size, rank
    )
    check_gradient(
        "grouped_reducescatter Sum",
        lambda t: hvd.grouped_reducescatter([t, t], op=hvd.Sum)[0],
        scattered,
        owner_weights * size,
        rank,
    )
    check_gradient(
        "reducescatter Average postscale 3",
        lambda t: hvd.reducescatter(t, op=hvd.Average, postscale_factor=3.0),
        scattered,
        owner_weights * np.float32(3.0),
        rank,
    )


def check_alltoall_gradient(rank, size, weights):
    splits = [(rank + dest) % 3 + 1 for dest in range(size)]
    x = np.ones((sum(splits), 2), np.float32)
    # Each row's gradient comes back from the rank it was sent to.
    expected = np.concatenate([np.full((count, 2), weights[dest], np.float32) for dest, count in enumerate(splits)])
    check_gradient("alltoall", lambda t: hvd.alltoall(t, splits=splits)[0], x, expected, rank)


def check_gradient_errors():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = hvd.allreduce(x, op=hvd.Max)
    expect_error(NotImplementedError, ["Average", "Sum"], tape.gradient, y, x)
