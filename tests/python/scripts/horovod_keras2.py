"""A Horovod tf.keras script (only the import changed), run under
TF_USE_LEGACY_KERAS=1 (Keras 2 from tf-keras, as Horovod's TensorFlow <= 2.15 had)
or, with the argument "keras3", on Keras 3 where the API exists there:

- DistributedOptimizer(...).register_local_var(var) and PartialDistributedOptimizer:
  local gradients are not reduced and are divided by the size (scale_local_gradients)
- the optimizer's _compute_gradients(loss, var_list, tape=...) returns reduced
  gradients that apply_gradients() applies once (Keras 2)
- backward_passes_per_step with `_agg_helper.counter` (Keras 2), also with
  sparse_as_dense=True on an RMSprop over an Embedding
- BroadcastGlobalVariablesCallback(root_rank, local_variables=[...])
- hvd.elastic.KerasState / TensorFlowKerasState with the script's optimizer

Each is a named check (scripts/checks.py).
"""

import sys

import numpy as np
import tensorflow as tf
from checks import check
from rank_checks import run_main

import lockstep.tensorflow as hvd_tf  # was: import horovod.tensorflow as hvd_tf
import lockstep.tensorflow.keras as hvd  # was: import horovod.tensorflow.keras as hvd

KERAS3 = sys.argv[1:] == ["keras3"]
keras = tf.keras
optimizers = keras.optimizers if KERAS3 else keras.optimizers.legacy


def close(actual, expected, what):
    actual = np.asarray(actual)
    assert np.allclose(actual, expected, rtol=1e-6), f"{what}: {actual.tolist()} != {np.asarray(expected).tolist()}"


def same_everywhere(value):
    values = hvd.allgather_object(np.asarray(value).tolist())
    return all(other == values[0] for other in values)


def check_local_vars(rank, size):
    x = tf.constant([[1.0, 2.0]]) * float(rank + 1)
    mine = np.array([[1.0], [2.0]]) * (rank + 1)
    mean = np.array([[1.0], [2.0]]) * (size + 1) / 2
    for op, shared_expected in ((hvd.Average, mean), (hvd.Sum, mean * size)):
        shared, local = tf.Variable(tf.ones([2, 1])), tf.Variable(tf.ones([2, 1]))
        opt = hvd.DistributedOptimizer(optimizers.SGD(0.5), op=op)
        opt.register_local_var(local)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(x @ shared) + tf.reduce_sum(x @ local)
        if KERAS3:
            grads = tape.gradient(loss, [shared, local])
            opt.apply_gradients(zip(grads, [shared, local]))
        else:
            pairs = opt._compute_gradients(loss, var_list=[shared, local], tape=tape)
            close(pairs[0][0], shared_expected, f"_compute_gradients: shared gradient ({op})")
            close(pairs[1][0], mine / size, "_compute_gradients: local gradient")
            opt.apply_gradients(pairs)
        # Applied once: reduced once, and the local one scaled once.
        close(shared.numpy(), 1.0 - 0.5 * shared_expected, f"shared variable after the update ({op})")
        close(local.numpy(), 1.0 - 0.5 * mine / size, "local variable after the update")


def two_layer_model(rank):
    inputs = keras.Input((2,))
    shared = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", name="shared")
    local = keras.layers.Dense(1, use_bias=False, name="local")
    model = keras.Model(inputs, shared(inputs) + local(inputs))
    local.kernel.assign(np.full((2, 1), rank + 1.0, np.float32))
    shared.kernel.assign(np.full((2, 1), 10.0 * (rank + 1), np.float32))
    return model, shared, local


def check_partial_optimizer_and_local_broadcast(rank, size):
    model, shared, local = two_layer_model(rank)
    opt = hvd.PartialDistributedOptimizer(optimizers.SGD(0.01), local_layers=[local])
    model.compile(optimizer=opt, loss="mse")
    x = np.full((4, 2), rank + 1.0, np.float32)
    y = np.zeros((4, 1), np.float32)
    callback = hvd.BroadcastGlobalVariablesCallback(0, local_variables=local.trainable_weights)
    # Before training: the shared layer is rank 0's everywhere, the local one each rank's own.
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[callback], shuffle=False)
    assert same_everywhere(shared.kernel.numpy()), "the shared layer is synchronized"
    assert not same_everywhere(local.kernel.numpy()), "the local layer stays each rank's own"


def check_aggregation(rank, size):
    for make in (lambda: optimizers.SGD(1.0),) + (() if KERAS3 else (lambda: keras.optimizers.SGD(1.0),)):
        var = tf.Variable([0.0])
        opt = hvd.DistributedOptimizer(make(), backward_passes_per_step=2, average_aggregated_gradients=True)
        for idx in range(4):
            with tf.GradientTape() as tape:
                loss = var * float(rank + 1) * float(idx + 1)
            if KERAS3:
                opt.apply_gradients(zip(tape.gradient(loss, [var]), [var]))
            else:
                opt.apply_gradients(opt._compute_gradients(loss, var_list=[var], tape=tape))
                assert opt._agg_helper.counter.numpy() == (idx + 1) % 2, f"_agg_helper.counter after {idx + 1}"
            # Every second batch: minus the mean over ranks of the two batches' mean.
            updates = [(2 * k + 1.5) * (size + 1) / 2 for k in range((idx + 1) // 2)]
            close(var.numpy(), [-sum(updates)], f"{type(opt).__name__} after batch {idx + 1}")


def check_sparse_as_dense_with_aggregation(rank, size):
    model = keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Embedding(10, 4), keras.layers.Flatten()])
    opt = hvd.DistributedOptimizer(optimizers.RMSprop(0.01), sparse_as_dense=True, backward_passes_per_step=2)
    model.compile(optimizer=opt, loss="mse")
    x = np.array([[rank, rank + 1, 2]] * 4, np.int32)
    y = np.full((4, 12), float(rank), np.float32)
    model.fit(x, y, batch_size=1, epochs=1, verbose=0, callbacks=[hvd.BroadcastGlobalVariablesCallback(0)])
    if not KERAS3:
        assert opt._agg_helper.counter.numpy() == 0, "4 batches: 2 updates, nothing pending"
    assert same_everywhere(model.layers[0].embeddings.numpy()), "embeddings are the same on every rank"


def check_elastic_state(rank, size):
    for state_class in (hvd.elastic.KerasState, hvd_tf.elastic.TensorFlowKerasState):
        model, shared, local = two_layer_model(0)
        opt = optimizers.Adam(0.1)
        model.compile(optimizer=hvd.DistributedOptimizer(opt), loss="mse")
        state = state_class(model, optimizer=model.optimizer, epoch=0)
        state.sync()
        committed = [w.numpy().copy() for w in model.weights]
        state.commit()
        model.fit(np.ones((2, 2), np.float32), np.zeros((2, 1), np.float32), verbose=0)
        assert not np.allclose(shared.kernel.numpy(), committed[0]), "training changed the weights"
        state.epoch = 5
        state.restore()
        for weight, value in zip(model.weights, committed):
            close(weight.numpy(), value, f"{state_class.__name__}: restored {weight.name}")
        assert state.epoch == 0, "restore() brings back the committed attributes"


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    assert KERAS3 or "tf_keras" in type(keras.optimizers.SGD()).__module__, "Keras 2 (tf-keras) expected"
    check(check_local_vars, rank, size)
    check(check_partial_optimizer_and_local_broadcast, rank, size)
    check(check_aggregation, rank, size)
    check(check_sparse_as_dense_with_aggregation, rank, size)
    check(check_elastic_state, rank, size)


if __name__ == "__main__":
    run_main(main)
