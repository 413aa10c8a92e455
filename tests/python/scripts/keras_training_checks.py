"""lockstep.keras DistributedOptimizer: sharded training equals one process on the
whole batch; checkpoint on rank 0 and resume; a shape mismatch fails fit()
everywhere instead of hanging."""

import os

import keras
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
from lockstep.keras.optimizer import is_distributed

EPOCHS = 2


def check_matches_one_process(
    rank, size, make_optimizer, what, tolerance, compression=hvd.Compression.none, **compile_options
):
    features, labels = global_data()
    reference = compile_model(make_model(seed=5), make_optimizer())
    start = weights_of(reference)
    reference.fit(features, labels, batch_size=GLOBAL_BATCH, epochs=EPOCHS, shuffle=False, verbose=0)

    model = compile_model(
        make_model(seed=5), hvd.DistributedOptimizer(make_optimizer(), compression=compression), **compile_options
    )
    model.set_weights(start)
    local_features, local_labels = local_shard((features, labels), rank, size)
    model.fit(local_features, local_labels, batch_size=GLOBAL_BATCH // size, epochs=EPOCHS, shuffle=False, verbose=0)
    assert_weights_close(weights_of(model), weights_of(reference), f"{what}: sharded fit vs one process", tolerance)
    assert_identical_across_ranks(weights_of(model), f"{what}: weights after fit")
    steps = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    assert steps == EPOCHS * STEPS_PER_EPOCH, f"{what}: optimizer took {steps} steps"


def check_optimizers_match_one_process(rank, size):
    check_matches_one_process(rank, size, lambda: keras.optimizers.SGD(0.1, momentum=0.9), "SGD+momentum", 1e-5)
    # TensorFlow runs several steps per call inside a tf.while_loop; torch allows one.
    steps_per_execution = 2 if keras.backend.backend() == "tensorflow" else 1
    check_matches_one_process(
        rank, size, lambda: keras.optimizers.Adam(0.01), "Adam", 1e-4, steps_per_execution=steps_per_execution
    )
    # float16 gradients on the wire: close to full precision, identical on every rank.
    check_matches_one_process(
        rank, size, lambda: keras.optimizers.SGD(0.1), "SGD, fp16 compression", 5e-3, compression=hvd.Compression.fp16
    )


def check_wrapper_properties():
    original = keras.optimizers.Adam(0.003, beta_1=0.8, name="my_adam")
    wrapped = hvd.DistributedOptimizer(original)
    assert isinstance(wrapped, keras.optimizers.Adam) and is_distributed(wrapped), "a distributed Adam"
    assert not is_distributed(original), "the original optimizer is left alone"
    assert type(wrapped).__name__ == "Adam", "the saved class name stays Adam"
    assert wrapped.get_config() == original.get_config(), "same config as the wrapped optimizer"
    try:
        hvd.DistributedOptimizer(wrapped)
    except ValueError as error:
        assert "already" in str(error), error
    else:
        raise AssertionError("wrapping twice must fail")


def check_checkpoint_on_rank_zero_and_resume(rank, size, directory):
    """The documented pattern: ModelCheckpoint on rank 0 only; resume with
    load_model on rank 0 and BroadcastGlobalVariablesCallback."""
    path = os.path.join(directory, f"checkpoint-{keras.backend.backend()}.keras")
    features, labels = local_shard(global_data(), rank, size)
    model = compile_model(make_model(seed=rank), hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)))
    callbacks = [hvd.BroadcastGlobalVariablesCallback(0), hvd.MetricAverageCallback()]
    if rank == 0:
        callbacks.append(keras.callbacks.ModelCheckpoint(path))
    model.fit(features, labels, batch_size=GLOBAL_BATCH // size, epochs=EPOCHS, callbacks=callbacks, verbose=0)
    hvd.broadcast_object(None)  # the checkpoint is complete before anyone looks at it
    assert os.path.exists(path), "rank 0 wrote the checkpoint"
    saved = hvd.broadcast_object(weights_of(model), root_rank=0)

    if rank == 0:
        resumed = hvd.load_model(path)
        assert is_distributed(resumed.optimizer), "load_model rewraps the optimizer"
        assert_weights_close(weights_of(resumed), saved, "weights restored from the checkpoint", 0.0)
    else:  # other ranks start from scratch, differently initialized
        resumed = compile_model(make_model(seed=100 + rank), hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)))
    seen = {}

    def after_broadcast(callback, event, index, logs):
        if event == "train_begin":
            seen["weights"] = weights_of(callback.model)
            seen["steps"] = int(keras.ops.convert_to_numpy(callback.model.optimizer.iterations))

    resumed.fit(
        features,
        labels,
        batch_size=GLOBAL_BATCH // size,
        initial_epoch=EPOCHS,
        epochs=EPOCHS + 1,
        callbacks=[hvd.BroadcastGlobalVariablesCallback(0), Recorder(after_broadcast)],
        verbose=0,
    )
    assert_weights_close(seen["weights"], saved, "every rank resumes from rank 0's checkpoint", 0.0)
    assert seen["steps"] == EPOCHS * STEPS_PER_EPOCH, f"optimizer step count after resume: {seen['steps']}"
    assert_identical_across_ranks(weights_of(resumed), "weights after resumed fit")


def check_mismatched_shapes_fail_fit(rank, size):
    """Rank-dependent layer sizes: every rank's fit() must raise, naming the shapes."""
    model = compile_model(
        make_model(seed=1, hidden=6 + rank, outputs=5), hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    )
    features, labels = local_shard(global_data(), rank, size)
    try:
        model.fit(features, labels, batch_size=GLOBAL_BATCH // size, epochs=1, verbose=0)
        # JAX runs steps asynchronously and reports a failed step when its results are
        # read (fit with verbose=0 reads none).
        weights_of(model)
    except Exception as error:  # noqa: BLE001 - the backend decides the wrapper type
        message = str(error)
        assert "Mismatched shapes" in message and "rank 1 sent" in message, (
            f"unclear error from fit: {type(error).__name__}: {message[:2000]}"
        )
        return message
    raise AssertionError("fit with mismatched gradient shapes across ranks did not fail")
