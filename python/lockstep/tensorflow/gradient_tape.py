"""DistributedGradientTape: a tf.GradientTape whose gradients are averaged over ranks."""

import tensorflow as tf

from lockstep.common.ops import Average
from lockstep.tensorflow.compression import Compression
from lockstep.tensorflow.gradient_reduction import GradientReducer
from lockstep.tensorflow.gradient_reduction import variable_key as _source_key


class DistributedGradientTape:
    """Wraps a tf.GradientTape; `gradient()` returns gradients reduced over all ranks.

        with tf.GradientTape() as tape:
            loss = ...
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)

    It can also wrap a tape before recording (`with DistributedGradientTape(
    tf.GradientTape()) as tape:`). Everything but `gradient` is the wrapped tape's.
    Works eagerly and inside tf.function, where all gradients go out as one grouped
    allreduce. Variables registered with register_local_source keep their local
    gradients, divided by the process set's size unless scale_local_gradients=False
    (as in Horovod: then they come from the same averaged loss as the others).
    device_dense, device_sparse, num_groups and groups are accepted for
    ported scripts: lockstep reduces on the host, and always in one group.
    """

    def __init__(
        self,
        gradtape,
        device_dense="",
        device_sparse="",
        compression=Compression.none,
        sparse_as_dense=False,
        op=Average,
        gradient_predivide_factor=1.0,
        num_groups=0,
        groups=None,
        process_set=None,
        scale_local_gradients=True,
    ):
        if not isinstance(gradtape, tf.GradientTape):
            raise TypeError(f"gradtape must be a tf.GradientTape, got {type(gradtape).__name__}")
        self._tape = gradtape
        self._reducer = GradientReducer(
            compression, sparse_as_dense, op, gradient_predivide_factor, process_set, scale_local_gradients
        )
        self._local_sources = set()
        self.process_set = process_set
        self.scale_local_gradients = bool(scale_local_gradients)

    def register_local_source(self, source):
        """Keep the gradient of `source` (a variable) local: it is not reduced."""
        self._local_sources.add(_source_key(source))

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients=tf.UnconnectedGradients.NONE):
        gradients = self._tape.gradient(target, sources, output_gradients, unconnected_gradients)
        flat = tf.nest.flatten(gradients)
        keep_local = [_source_key(source) in self._local_sources for source in tf.nest.flatten(sources)]
        return tf.nest.pack_sequence_as(gradients, self._reducer.reduce(flat, keep_local))

    def get_local_and_global_gradients(self, target, sources, output_gradients=None):
        """`gradient()`'s results split in two lists, each in the order of `sources`:
        the gradients of registered local sources (scaled as gradient() scales them)
        and the reduced ones, e.g. to take each one's norm apart (Horovod's API)."""
        flat_sources = tf.nest.flatten(sources)
        gradients = tf.nest.flatten(self.gradient(target, flat_sources, output_gradients))
        local, reduced = [], []
        for source, gradient in zip(flat_sources, gradients):
            (local if _source_key(source) in self._local_sources else reduced).append(gradient)
        return local, reduced

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        return self._tape.__exit__(exc_type, exc_value, traceback)

    def __getattr__(self, attribute):
        # Only called for what this class does not define: watch, reset, jacobian, ...
        return getattr(self._tape, attribute)


def PartialDistributedGradientTape(
    gradtape,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    op=Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    process_set=None,
    local_layers=None,
    scale_local_gradients=True,
):
    """A DistributedGradientTape that keeps the gradients of `local_layers`' trainable
    weights (a Keras layer or a list of them) local to each rank, e.g. for a
    per-rank head or embedding shard; arguments in Horovod's order. Local gradients
    are divided by the process set's size unless scale_local_gradients=False;
    get_local_and_global_gradients() returns them apart from the reduced ones."""
    tape = DistributedGradientTape(
        gradtape,
        device_dense,
        device_sparse,
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        num_groups,
        groups,
        process_set=process_set,
        scale_local_gradients=scale_local_gradients,
    )
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    for layer in local_layers:
        if not hasattr(layer, "trainable_weights"):
            raise TypeError(f"local_layers must hold Keras layers, got {type(layer).__name__}")
        for weight in layer.trainable_weights:
            tape.register_local_source(weight)
    return tape
