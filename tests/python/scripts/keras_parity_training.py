"""model.fit, saving and loading with lockstep.keras on the Keras line the
environment picks (issue 25): Keras 2's current and legacy optimizers under
TF_USE_LEGACY_KERAS=1, Keras 3's otherwise; the callbacks; backward_passes_per_step
inside the compiled train step; a model saved on rank 0 and resumed."""

import os

import numpy as np

import lockstep.keras as hvd
from lockstep.keras.keras_line import LEGACY, backend_name, keras, to_numpy
from lockstep.keras.optimizer import is_distributed

FEATURES, CLASSES, LOCAL_BATCH, STEPS = 4, 3, 4, 4


def optimizers():
    """(label, factory, backward_passes_per_step) to train with on this Keras line."""
    adam = ("adam", lambda: keras.optimizers.Adam(0.01))
    if LEGACY:
        legacy_adam = ("legacy-adam", lambda: keras.optimizers.legacy.Adam(0.01))
        legacy_sgd = ("legacy-sgd", lambda: keras.optimizers.legacy.SGD(0.05, momentum=0.9))
        return [(*adam, 2), (*legacy_adam, 1), (*legacy_sgd, 2)]
    if backend_name() != "tensorflow":  # passes=1 with fit: test_keras_frontend.py
        return [(*adam, 2)]
    return [(*adam, 1), (*adam, 2)]


def make_model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [keras.Input((FEATURES,)), keras.layers.Dense(5, activation="tanh"), keras.layers.Dense(CLASSES)]
    )


def local_data(rank):
    data = np.random.RandomState(10 + rank)
    features = data.randn(STEPS * LOCAL_BATCH, FEATURES).astype(np.float32)
    return features, data.randint(0, CLASSES, size=len(features)).astype(np.int64)


def train(model, optimizer, rank, epochs=2):
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callbacks = [
        hvd.BroadcastGlobalVariablesCallback(0),
        hvd.MetricAverageCallback(),
        hvd.LearningRateWarmupCallback(initial_lr=0.01, warmup_epochs=1),
    ]
    features, labels = local_data(rank)
    history = model.fit(
        features, labels, batch_size=LOCAL_BATCH, epochs=epochs, shuffle=False, callbacks=callbacks, verbose=0
    )
    return history.history["loss"]


def assert_same_on_every_rank(values, what):
    mine = [np.asarray(v) for v in values]
    root = hvd.broadcast_object(mine, root_rank=0)
    for index, (got, want) in enumerate(zip(mine, root)):
        assert np.array_equal(got, want), f"{what}: item {index} differs from rank 0's"


def check_fit_saving_and_loading(rank, size, directory):
    for label, make_optimizer, passes in optimizers():
        what = f"{label}, backward_passes_per_step={passes}"
        model = make_model(seed=rank)  # different on every rank until the broadcast
        optimizer = hvd.DistributedOptimizer(make_optimizer(), backward_passes_per_step=passes)
        losses = train(model, optimizer, rank)
        assert np.all(np.isfinite(losses)), f"{what}: losses {losses}"
        assert_same_on_every_rank(model.get_weights() + [losses], what)
    if backend_name() == "tensorflow":  # the other backends' resume: test_keras_frontend.py
        _check_resume(rank, directory)


def _check_resume(rank, directory):
    """Rank 0 saves (in every format this Keras line writes); load_model rewraps the
    optimizer with its state; training resumes identically everywhere."""
    model = make_model(seed=rank)
    label, make_optimizer, _ = optimizers()[0]  # Keras 2's legacy optimizers keep no state in .keras files
    train(model, hvd.DistributedOptimizer(make_optimizer()), rank, epochs=1)
    suffixes = (".keras", ".h5") if LEGACY else (".keras",)
    for suffix in suffixes:
        path = os.path.join(directory, f"model-{label}{suffix}")
        if rank == 0:
            model.save(path)
        hvd.broadcast_object(None)  # saved before anyone reads it
        if rank == 0:
            resumed = hvd.load_model(path)
            assert is_distributed(resumed.optimizer), f"{suffix}: load_model rewraps the optimizer"
            steps = int(to_numpy(resumed.optimizer.iterations))
            assert steps == STEPS, f"{suffix}: the optimizer's step count comes back ({steps})"
            for got, want in zip(resumed.get_weights(), model.get_weights()):
                assert np.array_equal(got, want), f"{suffix}: weights restored"
        else:
            resumed = make_model(seed=100 + rank)
            resumed.compile(
                optimizer=hvd.DistributedOptimizer(make_optimizer()),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            )
        features, labels = local_data(rank)
        resumed.fit(
            features,
            labels,
            batch_size=LOCAL_BATCH,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[hvd.BroadcastGlobalVariablesCallback(0)],
        )
        assert_same_on_every_rank(resumed.get_weights(), f"resumed from {suffix}")
