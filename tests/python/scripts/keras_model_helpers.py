"""Models, data and cross-rank comparisons shared by the lockstep.keras rank checks."""

import keras
import numpy as np

import lockstep.keras as hvd

FEATURES, CLASSES, GLOBAL_BATCH, STEPS_PER_EPOCH = 6, 3, 16, 4


def make_model(seed, hidden=8, outputs=CLASSES):
    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(hidden, activation="tanh"),
            keras.layers.Dense(outputs),
        ]
    )


def compile_model(model, optimizer, **options):
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        **options,
    )
    return model


def global_data(batches=STEPS_PER_EPOCH):
    data = np.random.RandomState(3)
    features = data.randn(batches * GLOBAL_BATCH, FEATURES).astype(np.float32)
    labels = data.randint(0, CLASSES, size=batches * GLOBAL_BATCH).astype(np.int64)
    return features, labels


def local_shard(arrays, rank, size):
    """Rank r's part of every global batch: with shuffle=False, local batch k on
    every rank together is exactly global batch k."""
    local = GLOBAL_BATCH // size
    rows = np.concatenate(
        [
            np.arange(start + rank * local, start + (rank + 1) * local)
            for start in range(0, len(arrays[0]), GLOBAL_BATCH)
        ]
    )
    return tuple(array[rows] for array in arrays)


def weights_of(model):
    return [np.asarray(w) for w in model.get_weights()]


def assert_weights_close(actual, expected, what, tolerance):
    assert len(actual) == len(expected), f"{what}: {len(actual)} weights, expected {len(expected)}"
    for index, (got, want) in enumerate(zip(actual, expected)):
        error = float(np.max(np.abs(got - want))) / max(1.0, float(np.max(np.abs(want))))
        assert error <= tolerance, f"{what}: weight {index} differs by {error:.3g}"


def assert_identical_across_ranks(values, what):
    """values: a list of arrays; every rank must hold exactly the same."""
    mine = [np.asarray(v) for v in values]
    root = hvd.broadcast_object(mine, root_rank=0)
    for index, (got, want) in enumerate(zip(mine, root)):
        assert np.array_equal(got, want), f"{what}: item {index} differs from rank 0's"


class Recorder(keras.callbacks.Callback):
    """Calls `record(callback, event, index, logs)` for train-begin, batch-begin
    and epoch-end events; place it where in the callback list the state matters."""

    def __init__(self, record):
        super().__init__()
        self.record = record

    def on_train_begin(self, logs=None):
        self.record(self, "train_begin", 0, logs)

    def on_train_batch_begin(self, batch, logs=None):
        self.record(self, "batch_begin", batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self.record(self, "epoch_end", epoch, logs)
