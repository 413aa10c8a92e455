"""A Horovod 0.28 TensorFlow script (only the import changed) for model-parallel
layers: PartialDistributedGradientTape(local_layers=...) and its
get_local_and_global_gradients(), DistributedGradientTape.register_local_source
and the legacy DistributedOptimizer.register_local_var. Local gradients are not
reduced and, with scale_local_gradients=True (the default), are divided by the
process set's size; the others are averaged. Eagerly and inside tf.function; each a
named check (scripts/checks.py)."""

import numpy as np
import tensorflow as tf
from checks import check
from rank_checks import run_main

import lockstep.tensorflow as hvd  # was: import horovod.tensorflow as hvd


def dense():
    layer = tf.keras.layers.Dense(2, use_bias=False, kernel_initializer="ones")
    layer.build((None, 3))
    return layer


def close(actual, expected, what):
    actual = np.asarray(actual)
    assert np.allclose(actual, expected, rtol=1e-6), f"{what}: {actual.tolist()} != {np.asarray(expected).tolist()}"


class Model:
    """Two layers, one shared and one local, on this rank's input."""

    def __init__(self, rank, size):
        self.shared, self.local = dense(), dense()
        self.x = tf.constant([[1.0, 2.0, 3.0]]) * float(rank + 1)
        # d loss / d kernel = x^T (the same for both layers); averaged: the mean over ranks.
        self.mine = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]) * (rank + 1)
        self.mean = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]) * (size + 1) / 2
        self.sources = [self.shared.kernel, self.local.kernel]

    def loss(self):
        return tf.reduce_sum(self.shared(self.x)) + tf.reduce_sum(self.local(self.x))


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    model = Model(rank, size)
    for scale, local_expected in ((True, model.mine / size), (False, model.mine)):
        check(check_partial_tape, model, scale, local_expected)
        check(check_register_local_source, model, scale, local_expected)
    check(check_partial_tape_in_a_tf_function, model, size)
    check(check_legacy_optimizer_register_local_var, model, size)
    check(check_local_gradients_on_a_process_set, model, rank, size)


def check_partial_tape(model, scale, local_expected):
    with tf.GradientTape() as tape:
        value = model.loss()
    tape = hvd.PartialDistributedGradientTape(tape, local_layers=[model.local], scale_local_gradients=scale)
    local_grads, global_grads = tape.get_local_and_global_gradients(value, model.sources)
    assert len(local_grads) == 1 and len(global_grads) == 1, (len(local_grads), len(global_grads))
    close(local_grads[0], local_expected, f"local gradient, scale_local_gradients={scale}")
    close(global_grads[0], model.mean, "global gradient")


def check_register_local_source(model, scale, local_expected):
    with tf.GradientTape() as tape:
        value = model.loss()
    tape = hvd.DistributedGradientTape(tape, scale_local_gradients=scale)
    tape.register_local_source(model.local.kernel)
    shared_grad, local_grad = tape.gradient(value, model.sources)
    close(shared_grad, model.mean, "register_local_source: the shared gradient")
    close(local_grad, local_expected, f"register_local_source, scale_local_gradients={scale}")


def check_partial_tape_in_a_tf_function(model, size):
    @tf.function
    def compiled():
        with tf.GradientTape() as tape:
            value = model.loss()
        tape = hvd.PartialDistributedGradientTape(tape, local_layers=model.local)
        return tape.get_local_and_global_gradients(value, model.sources)

    local_grads, global_grads = compiled()
    close(local_grads[0], model.mine / size, "tf.function: local gradient")
    close(global_grads[0], model.mean, "tf.function: global gradient")


def check_legacy_optimizer_register_local_var(model, size):
    # The same split and scaling.
    x = model.x
    w_shared, w_local = tf.Variable(tf.ones([3, 2])), tf.Variable(tf.ones([3, 2]))
    optimizer = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0))
    optimizer.register_local_var(w_local)
    pairs = optimizer.compute_gradients(
        lambda: tf.reduce_sum(x @ w_shared) + tf.reduce_sum(x @ w_local), var_list=[w_shared, w_local]
    )
    close(pairs[0][0], model.mean, "DistributedOptimizer: shared gradient")
    close(pairs[1][0], model.mine / size, "DistributedOptimizer: local gradient")


def check_local_gradients_on_a_process_set(model, rank, size):
    # Local gradients are divided by the set's size.
    mine = model.mine
    members = list(range(size - 1))
    workers = hvd.add_process_set(members)
    if rank in members:
        with tf.GradientTape() as tape:
            value = model.loss()
        tape = hvd.PartialDistributedGradientTape(tape, local_layers=[model.local], process_set=workers)
        local_grads, global_grads = tape.get_local_and_global_gradients(value, model.sources)
        close(local_grads[0], mine / len(members), "process set: local gradient")
        close(global_grads[0], np.mean([mine / (rank + 1) * (r + 1) for r in members], axis=0), "process set")
    hvd.barrier()
    hvd.remove_process_set(workers)


if __name__ == "__main__":
    run_main(main)
