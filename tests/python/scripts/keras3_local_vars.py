"""Keras 3 on any backend (KERAS_BACKEND): DistributedOptimizer.register_local_var
keeps a variable's gradient local, divided by the size (Horovod's
scale_local_gradients), while the others are averaged; applied once."""

import keras
import numpy as np
from rank_checks import run_main

import lockstep.keras as hvd


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    for scale in (True, False):
        shared = keras.Variable(np.ones((2,), np.float32))
        local = keras.Variable(np.ones((2,), np.float32))
        optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.5), scale_local_gradients=scale)
        optimizer.register_local_var(local)
        gradient = keras.ops.convert_to_tensor(np.full((2,), rank + 1.0, np.float32))
        optimizer.apply([gradient, gradient], [shared, local])
        shared_value, local_value = keras.ops.convert_to_numpy(shared), keras.ops.convert_to_numpy(local)
        assert np.allclose(shared_value, 1 - 0.5 * (size + 1) / 2), f"shared: {shared_value}"
        local_gradient = (rank + 1.0) / size if scale else rank + 1.0
        assert np.allclose(local_value, 1 - 0.5 * local_gradient), f"local (scale={scale}): {local_value}"


if __name__ == "__main__":
    run_main(main)
