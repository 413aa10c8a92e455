"""DistributedGradientTape: a tf.GradientTape whose gradients are averaged over ranks."""

import tensorflow as tf

from lockstep.common.ops import Average
from lockstep.tensorflow.compression import Compression
from lockstep.tensorflow.gradient_reduction import GradientReducer


class DistributedGradientTape:
    """Wraps a tf.GradientTape; `gradient()` returns gradients reduced over all ranks.

        with tf.GradientTape() as tape:
            loss = ...
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)

    It can also wrap a tape before recording (`with DistributedGradientTape(
    tf.GradientTape()) as tape:`). Everything but `gradient` is the wrapped tape's.
    Works eagerly and inside tf.function, where all dense gradients go out as one
    grouped allreduce. device_dense and device_sparse are accepted for ported
    scripts; lockstep reduces on the host.
    """

    def __init__(self, gradtape, device_dense="", device_sparse="", compression=Compression.none,
                 sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0):
        if not isinstance(gradtape, tf.GradientTape):
            raise TypeError(f"gradtape must be a tf.GradientTape, got {type(gradtape).__name__}")
        self._tape = gradtape
        self._reducer = GradientReducer(compression, sparse_as_dense, op, gradient_predivide_factor)

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        gradients = self._tape.gradient(target, sources, output_gradients, unconnected_gradients)
        flat = tf.nest.flatten(gradients)
        return tf.nest.pack_sequence_as(gradients, self._reducer.reduce(flat))

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        return self._tape.__exit__(exc_type, exc_value, traceback)

    def __getattr__(self, attribute):
        # Only called for what this class does not define: watch, reset, jacobian, ...
        return getattr(self._tape, attribute)
