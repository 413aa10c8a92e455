"""lockstep.keras' DistributedOptimizer on a process set (the Keras backend comes from
KERAS_BACKEND): one training step averages the gradients over the set only."""

import os

import keras
import numpy as np
from rank_checks import run_main

import lockstep.keras as hvd
import lockstep.numpy as hvd_numpy


def check_optimizer_on_a_set(me, mine):
    """process_sets_jax.py runs this too, in its launch, with the JAX backend."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")])
    model.compile(
        optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), process_set=mine),
        loss=lambda y_true, y_pred: keras.ops.sum(y_pred, axis=-1),
    )  # gradient: the input
    model.train_on_batch(np.full((1, 3), float(me + 1), np.float32), np.zeros((1, 1), np.float32))
    mean = sum(r + 1 for r in mine.ranks) / len(mine.ranks)
    weights = model.get_weights()[0]
    assert np.array_equal(weights, np.full((3, 1), 1.0 - mean, np.float32)), (weights, mean)


def main():
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    hvd.init()
    even = hvd.add_process_set([r for r in range(size) if r % 2 == 0])
    odd = hvd.add_process_set([r for r in range(size) if r % 2 == 1])
    me = hvd.rank()
    check_optimizer_on_a_set(me, even if me % 2 == 0 else odd)
    hvd_numpy.barrier()  # nobody exits (and so shuts down) while others still train


if __name__ == "__main__":
    run_main(main)
