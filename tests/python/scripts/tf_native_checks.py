"""What lockstep.tensorflow's native asynchronous ops promise beyond single results:
many independent collectives created in a different order on every rank, in one
Session run and one tf.function; Horovod's error types on every rank; SavedModel
round trips; scale factors as Horovod's TensorFlow ops apply them; topology ops;
broadcast_ into variables; PartialDistributedGradientTape; SyncBatchNormalization.
"""

import random
import shutil
import tempfile

import numpy as np
import tensorflow as tf
from rank_checks import assert_equal, expect_error

import lockstep.numpy as hvd_numpy
import lockstep.tensorflow as hvd

INDEPENDENT = 50


def independent_collectives(rank, size, values):
    """INDEPENDENT named collectives of several kinds and dtypes, created in an order
    that differs on every rank; returns {index: (output, expected)}."""
    order = list(range(INDEPENDENT))
    random.Random(rank).shuffle(order)
    made = {}
    for i in order:
        value = values[i]
        kind = i % 4
        if kind == 0:
            made[i] = hvd.allreduce(value, op=hvd.Sum, name=f"independent.{i}")
        elif kind == 1:
            made[i] = hvd.allgather(value, name=f"independent.{i}")
        elif kind == 2:
            made[i] = hvd.broadcast(value, root_rank=i % size, name=f"independent.{i}")
        else:
            made[i] = hvd.alltoall(tf.tile(value[None, :], [size, 1]), name=f"independent.{i}")
    return made


def independent_expected(i, size):
    dtype = (np.float32, np.int32, np.float64, np.int64)[i % 4]
    per_rank = [np.full(3, r + i, dtype) for r in range(size)]
    kind = i % 4
    if kind == 0:
        return sum(per_rank)
    if kind == 1:
        return np.concatenate(per_rank)
    if kind == 2:
        return per_rank[i % size]
    return np.stack(per_rank)


def independent_inputs(rank):
    dtypes = (tf.float32, tf.int32, tf.float64, tf.int64)
    return [tf.fill([3], tf.cast(rank + i, dtypes[i % 4])) for i in range(INDEPENDENT)]


def check_independent_in_session(rank, size):
    """Constant inputs too: graph optimizers must not run the collectives while
    optimizing (that ran them one by one, in each rank's order: a deadlock)."""
    with tf.Graph().as_default():
        made = independent_collectives(rank, size, independent_inputs(rank))
        with tf.compat.v1.Session() as session:
            for run in range(3):
                results = session.run(made)
                for i, value in results.items():
                    assert_equal(value, independent_expected(i, size), f"Session run {run} collective {i}")


def check_independent_in_function(rank, size):
    @tf.function
    def run_all(values):
        return independent_collectives(rank, size, values)

    inputs = independent_inputs(rank)
    for run in range(3):
        for i, value in run_all(inputs).items():
            assert_equal(value.numpy(), independent_expected(i, size), f"tf.function run {run} collective {i}")


def mismatch_cases(rank, size):
    """(what, build) pairs whose ranks disagree; build() creates the collective."""
    odd = rank % 2 == 1
    return [
        ("dtype", lambda: hvd.allreduce(tf.ones([2], tf.float64 if odd else tf.float32), name="mismatch.dtype")),
        ("op", lambda: hvd.allreduce(tf.ones([2]), op=hvd.Max if odd else hvd.Sum, name="mismatch.op")),
        ("root", lambda: hvd.broadcast(tf.ones([2]), root_rank=rank, name="mismatch.root")),
        ("shape", lambda: hvd.allgather(tf.ones([1, 3 if odd else 2]), name="mismatch.shape")),
    ]


def check_mismatch_errors(rank, size):
    """Every rank gets tf.errors.FailedPreconditionError naming the tensor, in every mode."""
    for what, build in mismatch_cases(rank, size):
        expect_error(tf.errors.FailedPreconditionError, [f"mismatch.{what}"], build)
        expect_error(tf.errors.FailedPreconditionError, [f"mismatch.{what}"], tf.function(build))
        with tf.Graph().as_default():
            output = build()
            with tf.compat.v1.Session() as session:
                expect_error(tf.errors.FailedPreconditionError, [f"mismatch.{what}"], session.run, output)
    assert_equal(
        hvd.allreduce(tf.constant([1.0]), op=hvd.Sum).numpy(),
        np.array([size], np.float32),
        "collectives work after the errors",
    )


def check_argument_errors(size):
    expect_error(ValueError, ["root_rank"], hvd.broadcast, tf.ones([1]), root_rank=-1)
    expect_error(tf.errors.InvalidArgumentError, ["divisible"], hvd.alltoall, tf.ones([size * 2 + 1, 2]))
    expect_error(TypeError, ["splits", "integers"], hvd.alltoall, tf.ones([2]), splits=[0.5, 1.5])
    expect_error(TypeError, ["list or tuple"], hvd.grouped_allreduce, tf.ones([2]))
    assert int(hvd.process_set_included_op(2)) == -3  # Horovod's code for an unknown set
    assert int(hvd.size_op(2)) == -3
    assert hvd.grouped_allreduce([]) == [] and hvd.grouped_allgather([]) == [], "empty groups return empty lists"


def check_scale_factors_match_the_core(rank, size):
    """TensorFlow's float attributes round the factors to float32 (as Horovod's ops
    do); after that, results are bit for bit the core's, as the numpy frontend
    computes them."""
    prescale, postscale = 1.0 / 3.0, 0.7
    factors = dict(prescale_factor=float(np.float32(prescale)), postscale_factor=float(np.float32(postscale)))
    for dtype in (np.float16, np.float32, np.float64, np.int32):
        values = (np.arange(7) * 1.37 + rank).astype(dtype)
        for op in (hvd.Sum, hvd.Average):
            got = hvd.allreduce(tf.constant(values), op=op, prescale_factor=prescale, postscale_factor=postscale)
            want = hvd_numpy.allreduce(values, op=op, **factors)
            assert_equal(got.numpy(), want, f"scaled allreduce {np.dtype(dtype).name} op {op}")
            rows = np.tile(values, (size, 1))
            got = hvd.reducescatter(tf.constant(rows), op=op, prescale_factor=prescale, postscale_factor=postscale)
            want = hvd_numpy.reducescatter(rows, op=op, **factors)
            assert_equal(got.numpy(), want, f"scaled reducescatter {np.dtype(dtype).name} op {op}")


def check_adasum(rank, size):
    """Adasum as Horovod offers it for TensorFlow: allreduce of floating tensors on a
    power-of-2 number of ranks, the core's result (compared with the numpy frontend's)."""
    values = (np.arange(6, dtype=np.float32) - 2.5) * (rank + 1) + rank
    if size & (size - 1):
        expect_error(NotImplementedError, ["power-of-2"], hvd.allreduce, tf.constant(values), op=hvd.Adasum)
        return
    want = hvd_numpy.allreduce(values, op=hvd.Adasum, name="adasum.numpy")
    assert_equal(hvd.allreduce(tf.constant(values), op=hvd.Adasum).numpy(), want, "Adasum allreduce")
    grouped = tf.function(lambda x: hvd.grouped_allreduce([x, 2 * x], op=hvd.Adasum))(tf.constant(values))
    assert_equal(grouped[0].numpy(), want, "Adasum grouped allreduce in tf.function")


def check_topology_ops(rank, size):
    expected = [rank, size, hvd.local_rank(), hvd.local_size(), 1]

    def build():
        return [hvd.rank_op(), hvd.size_op(), hvd.local_rank_op(), hvd.local_size_op(), hvd.process_set_included_op()]

    assert [int(t) for t in build()] == expected, "topology ops, eagerly"
    assert [int(t) for t in tf.function(build)()] == expected, "topology ops in tf.function"
    with tf.Graph().as_default():
        ops = build()
        with tf.compat.v1.Session() as session:
            assert [int(v) for v in session.run(ops)] == expected, "topology ops in a Session"


def check_broadcast_in_place(rank, size):
    root = size - 1
    variables = [tf.Variable(np.full(3, rank, np.float32)), tf.Variable(np.int64(rank * 10))]
    returned = hvd.broadcast_(variables, root_rank=root)
    assert returned[0] is variables[0], "broadcast_ returns the variables eagerly"
    assert_equal(variables[0].numpy(), np.full(3, root, np.float32), "broadcast_ float variable")
    assert_equal(np.asarray(variables[1].numpy()), np.array(root * 10, np.int64), "broadcast_ int variable")
    for variable in variables:
        variable.assign(tf.cast(tf.fill(tf.shape(variable), rank + 7), variable.dtype))
    tf.function(lambda: hvd.broadcast_(variables, root_rank=0))()
    assert_equal(variables[0].numpy(), np.full(3, 7, np.float32), "broadcast_ in tf.function")


class Doubler(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def __call__(self, x):
        return hvd.allreduce(x, op=hvd.Sum, name="saved.allreduce") * 2.0

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def gradient(self, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(hvd.allreduce(x, op=hvd.Sum, name="saved.forward"))
        return tape.gradient(y, x)


def check_saved_model(rank, size):
    """A tf.function holding lockstep ops saves and loads in a process that imported
    lockstep.tensorflow, and the loaded functions run the collectives."""
    directory = tempfile.mkdtemp(prefix=f"lockstep_saved_{rank}_")
    try:
        tf.saved_model.save(Doubler(), directory)
        loaded = tf.saved_model.load(directory)
        x = tf.fill([4], float(rank + 1))
        assert_equal(loaded(x).numpy(), np.full(4, 2.0 * size * (size + 1) / 2, np.float32), "loaded allreduce")
        assert_equal(loaded.gradient(x).numpy(), np.full(4, float(size), np.float32), "loaded gradient")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def check_partial_tape(rank, size):
    """Gradients of local layers stay local; the others are averaged."""
    import keras  # noqa: PLC0415 (only this check needs Keras)

    shared, local = keras.layers.Dense(1, use_bias=False), keras.layers.Dense(1, use_bias=False)
    x = tf.ones([1, 1]) * float(rank + 1)
    shared.build((None, 1))
    local.build((None, 1))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(shared(x) + local(x))
    tape = hvd.PartialDistributedGradientTape(tape, local_layers=[local])
    shared_grad, local_grad = tape.gradient(loss, [shared.kernel, local.kernel])
    assert_equal(shared_grad.numpy(), np.full((1, 1), (size + 1) / 2, np.float32), "shared gradient is averaged")
    local_want = np.full((1, 1), (rank + 1.0) / size, np.float32)  # Horovod's scale_local_gradients
    assert_equal(local_grad.numpy(), local_want, "local gradient stays local")


def check_sync_batch_norm(rank, size):
    """Training-mode output equals plain batch norm over the global batch."""
    import keras  # noqa: PLC0415

    global_batch = np.random.RandomState(0).normal(size=(4 * size, 3)).astype(np.float32) * 3 + 1
    mine = global_batch[4 * rank : 4 * rank + 4]
    synced = hvd.SyncBatchNormalization(momentum=0.5)
    plain = keras.layers.BatchNormalization(momentum=0.5)
    got = synced(tf.constant(mine), training=True).numpy()
    want = plain(tf.constant(global_batch), training=True).numpy()[4 * rank : 4 * rank + 4]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg="SyncBatchNormalization output")
    np.testing.assert_allclose(
        synced.moving_mean.numpy(), plain.moving_mean.numpy(), rtol=1e-5, err_msg="moving mean from the global batch"
    )
    # Gradients flow back through the statistics' allreduce: the ranks' input
    # gradients together are plain batch norm's on the global batch.
    x_mine, x_all = tf.constant(mine), tf.constant(global_batch)
    with tf.GradientTape() as tape:
        tape.watch(x_mine)
        loss = tf.reduce_sum(synced(x_mine, training=True) ** 3)
    with tf.GradientTape() as plain_tape:
        plain_tape.watch(x_all)
        plain_loss = tf.reduce_sum(plain(x_all, training=True) ** 3)
    got = hvd.allgather(tape.gradient(loss, x_mine)).numpy()
    np.testing.assert_allclose(
        got,
        plain_tape.gradient(plain_loss, x_all).numpy(),
        rtol=1e-3,
        atol=1e-3,
        err_msg="SyncBatchNormalization input gradients",
    )


def check_tf1_distributed_optimizer(rank, size):
    """Horovod's TF1 pattern: a wrapped tf.compat.v1 optimizer's minimize() uses the
    gradient averaged over ranks, so one step equals a step on the global batch."""
    features = np.arange(2 * size, dtype=np.float32).reshape(size, 2) + 1.0

    def one_step(rows, wrap):
        with tf.Graph().as_default():
            weights = tf.compat.v1.get_variable("w", initializer=np.array([0.5, -0.25], np.float32))
            loss = tf.reduce_mean(tf.square(tf.reduce_sum(tf.constant(rows) * weights, axis=1) - 1.0))
            optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
            train = (hvd.DistributedOptimizer(optimizer) if wrap else optimizer).minimize(loss)
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                session.run(train)
                return session.run(weights)

    distributed = one_step(features[rank : rank + 1], wrap=True)
    reference = one_step(features, wrap=False)
    np.testing.assert_allclose(distributed, reference, rtol=1e-6, err_msg="TF1 DistributedOptimizer step")
    import keras  # noqa: PLC0415

    wrapped = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    assert isinstance(wrapped, keras.optimizers.SGD), "Keras optimizers get lockstep.keras's wrapper"
    expect_error(TypeError, ["optimizer"], hvd.DistributedOptimizer, object())


def check_build_info():
    assert hvd.cuda_built() == bool(hvd.nccl_built()), "CUDA code is built with the NCCL backend only"


def check_native_ops(rank, size):
    check_independent_in_session(rank, size)
    check_independent_in_function(rank, size)
    check_mismatch_errors(rank, size)
    check_argument_errors(size)
    check_scale_factors_match_the_core(rank, size)
    check_adasum(rank, size)
    check_topology_ops(rank, size)
    check_broadcast_in_place(rank, size)
    check_saved_model(rank, size)
    check_partial_tape(rank, size)
    check_sync_batch_norm(rank, size)
    check_tf1_distributed_optimizer(rank, size)
    check_build_info()
