"""A Horovod 0.28 TensorFlow script (only the import changed) for model-parallel
layers: PartialDistributedGradientTape(local_layers=...) and its
get_local_and_global_gradients(), DistributedGradientTape.register_local_source
and the legacy DistributedOptimizer.register_local_var. Local gradients are not
reduced and, with scale_local_gradients=True (the default), are divided by the
process set's size; the others are averaged. Eagerly and inside tf.function."""

import numpy as np
import tensorflow as tf
from rank_checks import run_main

import lockstep.tensorflow as hvd  # was: import horovod.tensorflow as hvd


def dense():
    layer = tf.keras.layers.Dense(2, use_bias=False, kernel_initializer="ones")
    layer.build((None, 3))
    return layer


def close(actual, expected, what):
    actual = np.asarray(actual)
    assert np.allclose(actual, expected, rtol=1e-6), f"{what}: {actual.tolist()} != {np.asarray(expected).tolist()}"


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    shared, local = dense(), dense()
    x = tf.constant([[1.0, 2.0, 3.0]]) * float(rank + 1)
    # d loss / d kernel = x^T (the same for both layers); averaged: the mean over ranks.
    mine = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]) * (rank + 1)
    mean = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]) * (size + 1) / 2

    def loss():
        return tf.reduce_sum(shared(x)) + tf.reduce_sum(local(x))

    sources = [shared.kernel, local.kernel]
    for scale, local_expected in ((True, mine / size), (False, mine)):
        with tf.GradientTape() as tape:
            value = loss()
        tape = hvd.PartialDistributedGradientTape(tape, local_layers=[local], scale_local_gradients=scale)
        local_grads, global_grads = tape.get_local_and_global_gradients(value, sources)
        assert len(local_grads) == 1 and len(global_grads) == 1, (len(local_grads), len(global_grads))
        close(local_grads[0], local_expected, f"local gradient, scale_local_gradients={scale}")
        close(global_grads[0], mean, "global gradient")

        with tf.GradientTape() as tape:
            value = loss()
        tape = hvd.DistributedGradientTape(tape, scale_local_gradients=scale)
        tape.register_local_source(local.kernel)
        shared_grad, local_grad = tape.gradient(value, sources)
        close(shared_grad, mean, "register_local_source: the shared gradient")
        close(local_grad, local_expected, f"register_local_source, scale_local_gradients={scale}")

    @tf.function
    def compiled():
        with tf.GradientTape() as tape:
            value = loss()
        tape = hvd.PartialDistributedGradientTape(tape, local_layers=local)
        return tape.get_local_and_global_gradients(value, sources)

    local_grads, global_grads = compiled()
    close(local_grads[0], mine / size, "tf.function: local gradient")
    close(global_grads[0], mean, "tf.function: global gradient")

    # The legacy optimizer's register_local_var: the same split and scaling.
    w_shared, w_local = tf.Variable(tf.ones([3, 2])), tf.Variable(tf.ones([3, 2]))
    optimizer = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0))
    optimizer.register_local_var(w_local)
    pairs = optimizer.compute_gradients(
        lambda: tf.reduce_sum(x @ w_shared) + tf.reduce_sum(x @ w_local), var_list=[w_shared, w_local]
    )
    close(pairs[0][0], mean, "DistributedOptimizer: shared gradient")
    close(pairs[1][0], mine / size, "DistributedOptimizer: local gradient")

    # Over a process set: local gradients are divided by the set's size.
    members = list(range(size - 1))
    workers = hvd.add_process_set(members)
    if rank in members:
        with tf.GradientTape() as tape:
            value = loss()
        tape = hvd.PartialDistributedGradientTape(tape, local_layers=[local], process_set=workers)
        local_grads, global_grads = tape.get_local_and_global_gradients(value, sources)
        close(local_grads[0], mine / len(members), "process set: local gradient")
        close(global_grads[0], np.mean([mine / (rank + 1) * (r + 1) for r in members], axis=0), "process set")
    hvd.barrier()
    hvd.remove_process_set(workers)


if __name__ == "__main__":
    run_main(main)
