"""Elastic Keras 3 (TensorFlow backend) jobs for the elastic tests: a linear model
with momentum SGD on a fixed dataset, each rank training on its shard x[rank::size].

    elastic_keras_train.py fit        model.fit with the elastic callbacks, commits at
                                      epoch ends (Keras 3 cannot shorten a begun epoch)
    elastic_keras_train.py loop       a custom loop with DistributedGradientTape and
                                      TensorFlowKerasState, commits every 2 steps
    elastic_keras_train.py MODE --reference HISTORY
                                      the same training in one process with the ranks
                                      simulated; HISTORY is "size@commit,..."

Rank 0 prints a line per step and, at the end, a JSON line with the weights. Steps
take no extra time (LOCKSTEP_TEST_STEP_SECONDS paces them); a test that acts on the
running job holds it until it has (elastic_hold.py: fit holds after a batch once the
epoch, which counts its commits, reaches LOCKSTEP_TEST_HOLD_AT).
"""

import json
import math
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from elastic_hold import hold  # noqa: E402

SAMPLES, FEATURES, BATCH, EPOCHS = 60, 5, 4, 3  # 60 splits evenly over 2..5 ranks
STEP_SECONDS = float(os.environ.get("LOCKSTEP_TEST_STEP_SECONDS", "0"))
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)


def dataset():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((SAMPLES, FEATURES)).astype(np.float32)
    y = (x @ np.arange(1.0, FEATURES + 1) + 0.1 * rng.standard_normal(SAMPLES)).astype(np.float32)[:, None]
    return x, y


def make_model():
    model = keras.Sequential(
        [keras.Input((FEATURES,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")]
    )
    return model, keras.optimizers.SGD(0.05, momentum=0.5)


def shard(x, y, rank, size):
    return x[rank::size], y[rank::size]


def mse_gradient(model, xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(xb) - yb))
    return tape.gradient(loss, model.trainable_variables)


def run_fit(hvd, x, y):
    model, optimizer = make_model()
    model.compile(optimizer=hvd.DistributedOptimizer(optimizer), loss="mse")
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)

    class Progress(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if hvd.rank() == 0:
                print(f"[train] size {hvd.size()} epoch {state.epoch} commits {state.epoch}", flush=True)
            if STEP_SECONDS:
                time.sleep(STEP_SECONDS)
            hold(state.epoch, hvd.rank())

    callbacks = [
        hvd.elastic.UpdateEpochStateCallback(state),
        hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.CommitStateCallback(state, batches_per_commit=1000),
        Progress(),
    ]

    @hvd.elastic.run
    def train(state):
        if hvd.rank() == 0:
            print(f"[train] start size {hvd.size()} commits {state.epoch} epoch {state.epoch}", flush=True)
        xs, ys = shard(x, y, hvd.rank(), hvd.size())
        state.model.fit(
            xs, ys, batch_size=BATCH, epochs=EPOCHS - state.epoch, shuffle=False, callbacks=callbacks, verbose=0
        )

    train(state)
    return model


def run_loop(hvd, x, y):
    model, optimizer = make_model()
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, batch=0, commits=0)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(xb) - yb))
        tape = hvd.DistributedGradientTape(tape)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))

    @hvd.elastic.run
    def train(state):
        if hvd.rank() == 0:
            print(f"[train] start size {hvd.size()} commits {state.commits} epoch {state.epoch}", flush=True)
        while state.epoch < EPOCHS:
            xs, ys = shard(x, y, hvd.rank(), hvd.size())
            steps = math.ceil(len(xs) / BATCH)
            while state.batch < steps:
                begin = state.batch * BATCH
                step(xs[begin : begin + BATCH], ys[begin : begin + BATCH])
                if hvd.rank() == 0:
                    print(f"[train] size {hvd.size()} epoch {state.epoch} commits {state.commits}", flush=True)
                if STEP_SECONDS:
                    time.sleep(STEP_SECONDS)
                state.batch += 1
                if state.batch % 2 == 0 and state.batch < steps:
                    hold(state.commits, hvd.rank())
                    state.commits += 1
                    state.commit()
            state.epoch, state.batch = state.epoch + 1, 0
            hold(state.commits, hvd.rank())
            state.commits += 1
            state.commit()

    train(state)
    return model


def run_elastic(mode):
    import lockstep.keras as hvd_keras
    import lockstep.tensorflow as hvd_tf

    hvd = hvd_keras if mode == "fit" else hvd_tf
    hvd.init()
    rank, size = hvd.rank(), hvd.size()  # asked once: a rank that finishes first shuts lockstep down
    x, y = dataset()
    model = (run_fit if mode == "fit" else run_loop)(hvd, x, y)
    if rank == 0:
        print(
            "[result] " + json.dumps({"weights": model.get_weights()[0].flatten().tolist(), "size": size}), flush=True
        )


def run_reference(mode, history):
    """Uninterrupted training with `history`'s membership [(size, from commit)]: each
    step applies the mean of the simulated ranks' gradients, as the allreduce does."""
    x, y = dataset()
    model, optimizer = make_model()
    optimizer.build(model.trainable_variables)
    size_at = lambda commits: [size for size, at in history if at <= commits][-1]  # noqa: E731
    commits, epoch, batch = 0, 0, 0
    while epoch < EPOCHS:
        size = size_at(commits)
        shards = [shard(x, y, rank, size) for rank in range(size)]
        steps = math.ceil(len(shards[0][0]) / BATCH)
        while batch < steps:
            begin = batch * BATCH
            gradients = [mse_gradient(model, xs[begin : begin + BATCH], ys[begin : begin + BATCH]) for xs, ys in shards]
            mean = [tf.add_n(list(parts)) / len(parts) for parts in zip(*gradients)]
            optimizer.apply_gradients(zip(mean, model.trainable_variables))
            batch += 1
            if mode == "loop" and batch % 2 == 0 and batch < steps:
                commits += 1
                if size_at(commits) != size:  # the next job starts from this commit
                    break
        else:
            epoch, batch, commits = epoch + 1, 0, commits + 1
    print("[result] " + json.dumps({"weights": model.get_weights()[0].flatten().tolist()}), flush=True)


if __name__ == "__main__":
    if sys.argv[2:3] == ["--reference"]:
        run_reference(sys.argv[1], [tuple(int(v) for v in part.split("@")) for part in sys.argv[3].split(",")])
    else:
        run_elastic(sys.argv[1])
