"""The effect of each lockstep.keras callback, observed from inside model.fit."""

import keras
import numpy as np
from keras_model_helpers import (
    GLOBAL_BATCH,
    STEPS_PER_EPOCH,
    Recorder,
    assert_identical_across_ranks,
    assert_weights_close,
    compile_model,
    global_data,
    local_shard,
    make_model,
    weights_of,
)

import lockstep.keras as hvd


def fit(model, rank, size, callbacks, epochs=2):
    features, labels = local_shard(global_data(), rank, size)
    return model.fit(
        features, labels, batch_size=GLOBAL_BATCH // size, epochs=epochs, callbacks=callbacks, shuffle=False, verbose=0
    )


def check_broadcast_overwrites_other_ranks(rank, size):
    model = compile_model(make_model(seed=rank), hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)))
    initial = weights_of(model)
    root_initial = hvd.broadcast_object(initial, root_rank=0)
    if rank != 0:
        assert any(not np.array_equal(a, b) for a, b in zip(initial, root_initial)), "ranks start different"
    seen = {}

    def after_broadcast(callback, event, index, logs):
        if event == "train_begin":
            seen["weights"] = weights_of(callback.model)

    fit(model, rank, size, [hvd.BroadcastGlobalVariablesCallback(0), Recorder(after_broadcast)])
    assert_weights_close(seen["weights"], root_initial, "weights right after the broadcast", 0.0)
    assert_identical_across_ranks(weights_of(model), "weights after fit with broadcast")


def check_metric_average(rank, size):
    model = compile_model(make_model(seed=0), hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)))
    raw = []

    def before_averaging(callback, event, index, logs):
        if event == "epoch_end":
            raw.append({key: float(value) for key, value in logs.items()})

    history = fit(model, rank, size, [Recorder(before_averaging), hvd.MetricAverageCallback()])
    every_rank = hvd.allgather_object(raw)
    for epoch in range(2):
        for key in ("loss", "accuracy"):
            local_values = [ranks_raw[epoch][key] for ranks_raw in every_rank]
            expected = float(np.mean(local_values))
            got = history.history[key][epoch]
            assert abs(got - expected) <= 1e-6 * max(1.0, abs(expected)), (
                f"epoch {epoch} {key}: averaged {got}, mean of ranks {expected} ({local_values})"
            )
    assert_identical_across_ranks([np.array(history.history["loss"])], "averaged loss history")
    losses = [ranks_raw[0]["loss"] for ranks_raw in every_rank]
    assert len(set(losses)) == size, f"ranks' own losses should differ before averaging: {losses}"


def expected_warmup_rates(initial_lr, warmup_epochs, size, epochs):
    """Horovod's warmup: from initial_lr / size up to initial_lr, every batch."""
    rates = []
    for epoch in range(epochs):
        for batch in range(STEPS_PER_EPOCH):
            if epoch >= warmup_epochs:
                rates.append(rates[-1])  # unchanged after the warmup
                continue
            progress = epoch + batch / STEPS_PER_EPOCH + 1.0 / STEPS_PER_EPOCH
            rates.append(initial_lr / size * (progress * (size - 1) / warmup_epochs + 1))
    return rates


def record_rates_and_momentum(rates, momenta):
    def record(callback, event, index, logs):
        optimizer = callback.model.optimizer
        if event == "batch_begin":
            rates.append(float(keras.ops.convert_to_numpy(optimizer.learning_rate)))
            momenta.append(float(optimizer.momentum))

    return record


def check_learning_rate_warmup(rank, size):
    initial_lr, warmup_epochs, epochs, momentum = 0.2, 2, 3, 0.9
    model = compile_model(
        make_model(seed=0), hvd.DistributedOptimizer(keras.optimizers.SGD(initial_lr, momentum=momentum))
    )
    rates, momenta = [], []
    warmup = hvd.LearningRateWarmupCallback(
        initial_lr, warmup_epochs=warmup_epochs, momentum_correction=keras.backend.backend() == "torch"
    )
    history = fit(model, rank, size, [warmup, Recorder(record_rates_and_momentum(rates, momenta))], epochs)
    expected = expected_warmup_rates(initial_lr, warmup_epochs, size, epochs)
    np.testing.assert_allclose(rates, expected, rtol=1e-6, err_msg="learning rate at each batch")
    per_epoch = [expected[(e + 1) * STEPS_PER_EPOCH - 1] for e in range(epochs)]
    np.testing.assert_allclose(history.history["lr"], per_epoch, rtol=1e-6, err_msg="logs['lr'] per epoch")
    if keras.backend.backend() == "torch":  # momentum is read each step only outside a compiled graph
        previous = [initial_lr] + rates[:-1]
        corrected = [momentum * new / old if new != old else momentum for new, old in zip(rates, previous)]
        np.testing.assert_allclose(momenta, corrected, rtol=1e-6, err_msg="momentum correction per batch")
        assert model.optimizer.momentum == momentum, "momentum is restored after each batch"


def check_learning_rate_schedule(rank, size):
    model = compile_model(make_model(seed=0), hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)))
    rates, momenta = [], []
    schedule = hvd.LearningRateScheduleCallback(
        0.1, multiplier=lambda epoch: 0.5**epoch, start_epoch=1, momentum_correction=False
    )
    fit(model, rank, size, [schedule, Recorder(record_rates_and_momentum(rates, momenta))], epochs=3)
    per_batch = [0.1] * STEPS_PER_EPOCH + [0.05] * STEPS_PER_EPOCH + [0.025] * STEPS_PER_EPOCH
    np.testing.assert_allclose(rates, per_batch, rtol=1e-6, err_msg="staircase schedule from epoch 1")
