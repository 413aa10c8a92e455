"""Horovod parity of lockstep.keras (issue 25), for the Keras line the environment
picks: Keras 3 (KERAS_BACKEND names the backend) or, with TF_USE_LEGACY_KERAS=1,
Keras 2 from tf-keras. All checks run in one launch, since imports dominate; each
is a named check (scripts/checks.py), and LOCKSTEP_CHECKS picks some.

argv[1]: a directory shared by the ranks, for saved models.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from checks import check  # noqa: E402
from keras_parity_training import check_fit_saving_and_loading  # noqa: E402
from rank_checks import expect_error, run_main  # noqa: E402

import lockstep.keras as hvd  # noqa: E402
from lockstep.keras.keras_line import LEGACY, backend_name, keras, to_numpy, to_tensor  # noqa: E402
from lockstep.keras.optimizer import is_distributed  # noqa: E402


def variable(values):
    if LEGACY:
        import tensorflow as tf

        return tf.Variable(np.asarray(values, np.float32))
    return keras.Variable(np.asarray(values, np.float32))


def mean_factor(size):
    """The average over ranks of (rank + 1)."""
    return (size + 1) / 2.0


def check_aggregation(rank, size, average):
    """backward_passes_per_step=2: nothing moves on the first batch of each pair; the
    second applies the ranks' average of the pair's sum (halved with
    average_aggregated_gradients); a non-finite gradient spoils only its own pair."""
    weights = variable([0.0, 0.0])
    # Keras 2's current SGD keeps a momentum slot even at momentum 0 (inf * 0 = nan
    # would stay there); its legacy SGD, like Keras 3's, has no state to spoil.
    sgd = keras.optimizers.legacy.SGD(1.0) if LEGACY else keras.optimizers.SGD(1.0)
    optimizer = hvd.DistributedOptimizer(sgd, backward_passes_per_step=2, average_aggregated_gradients=average)
    apply = _step_function(optimizer, weights)
    divisor = 2.0 if average else 1.0
    m = mean_factor(size)

    def batch(index, value=None):
        grad = np.full(2, (rank + 1) * (index + 1) if value is None else value, np.float32)
        apply(to_tensor(grad))
        return to_numpy(weights)

    assert np.array_equal(batch(0), [0, 0]), "the first batch of a pair only accumulates"
    np.testing.assert_allclose(batch(1), np.full(2, -m * 3 / divisor), rtol=1e-6, err_msg="after one pair")
    batch(2)
    np.testing.assert_allclose(batch(3), np.full(2, -m * 10 / divisor), rtol=1e-6, err_msg="after two pairs")
    expected_iterations = 4 if LEGACY else 2  # Keras 3 counts updates when it accumulates
    assert int(to_numpy(optimizer.iterations)) == expected_iterations, to_numpy(optimizer.iterations)
    batch(4, value=np.inf if rank == 0 else 1.0)
    assert not np.isfinite(batch(5)).any(), "an infinite gradient reaches its own update, as in Horovod"
    weights.assign(np.zeros(2, np.float32))
    batch(6)
    np.testing.assert_allclose(
        batch(7), np.full(2, -m * 15 / divisor), rtol=1e-6, err_msg="the pair after a non-finite one starts from zeros"
    )


def _step_function(optimizer, weights):
    if backend_name() != "tensorflow":
        return lambda grad: optimizer.apply_gradients([(grad, weights)])
    import tensorflow as tf

    if not LEGACY:
        optimizer.build([weights])

    @tf.function
    def apply(grad):  # compiled, as model.fit runs it
        optimizer.apply_gradients([(grad, weights)])

    return apply


def check_config_round_trip(rank, size):
    """from_config(get_config()) of a wrapped optimizer's class is another wrapped
    optimizer with the same settings, which reduces (Horovod's closure class)."""
    wrapped = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0, momentum=0.5), op=hvd.Sum, backward_passes_per_step=1)
    clone = type(wrapped).from_config(wrapped.get_config())
    assert is_distributed(clone) and type(clone).__name__ == "SGD", type(clone)
    assert clone.get_config() == wrapped.get_config(), (clone.get_config(), wrapped.get_config())
    weights = variable([0.0])
    clone.apply_gradients([(to_tensor(np.full(1, rank + 1.0, np.float32)), weights)])
    np.testing.assert_allclose(
        to_numpy(weights), [-mean_factor(size) * size], rtol=1e-6, err_msg="the clone sums over ranks like the original"
    )
    expect_error(
        ValueError,
        ["backward_passes_per_step"],
        hvd.DistributedOptimizer,
        keras.optimizers.SGD(),
        backward_passes_per_step=0,
    )


def check_second_import_path():
    import lockstep.tensorflow.keras as hvd_tf_keras
    from lockstep.tensorflow.keras.callbacks import BroadcastGlobalVariablesCallback

    assert hvd_tf_keras.DistributedOptimizer is hvd.DistributedOptimizer
    assert hvd_tf_keras.callbacks.MetricAverageCallback is hvd.callbacks.MetricAverageCallback
    assert BroadcastGlobalVariablesCallback is hvd.BroadcastGlobalVariablesCallback
    assert hvd_tf_keras.load_model is hvd.load_model and hvd_tf_keras.rank() == hvd.rank()


def check_keras_line():
    if LEGACY:
        import tensorflow as tf
        import tf_keras

        assert tf.keras.optimizers.Adam is keras.optimizers.Adam, "lockstep.keras uses tf.keras"
        assert tf_keras.__version__.startswith("2."), tf_keras.__version__
    else:
        assert keras.__version__.startswith("3."), keras.__version__


def run_parity_checks(rank, size, directory):
    """Every parity check (those of TensorFlow's only on its backend); keras_ranks.py
    runs them too, in the same launch as the frontend's checks for its backend."""
    check(check_keras_line)
    check(check_second_import_path)
    check("aggregation_summed", check_aggregation, rank, size, average=False)
    check("aggregation_averaged", check_aggregation, rank, size, average=True)
    check(check_config_round_trip, rank, size)
    if backend_name() == "tensorflow":
        from keras_parity_tensorflow import check_partial_tape, check_sync_batch_norm

        check(check_sync_batch_norm, rank, size)
        check(check_partial_tape, rank, size)
    check(check_fit_saving_and_loading, rank, size, directory)


def main():
    hvd.init()
    run_parity_checks(hvd.rank(), hvd.size(), sys.argv[1])
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
