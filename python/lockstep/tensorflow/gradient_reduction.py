"""Averaging a list of gradients over ranks: what DistributedGradientTape and the
Keras DistributedOptimizer (TensorFlow backend) both do before an update."""

import tensorflow as tf

from lockstep.common.ops import Average, Sum, predivided_scaling
from lockstep.tensorflow.compression import Compression
from lockstep.tensorflow.mpi_ops import allreduce, grouped_allreduce


class GradientReducer:
    """Reduces gradient lists with fixed settings.

    Dense gradients go out as one grouped allreduce (one negotiation, fused).
    tf.IndexedSlices (e.g. from embeddings) are gathered, or densified first with
    sparse_as_dense=True, which pays off when most rows are touched anyway.
    gradient_predivide_factor f splits the averaging into a division by f before
    the sum and by size/f after it, which keeps low-precision sums in range.
    """

    def __init__(self, compression=Compression.none, sparse_as_dense=False, op=Average,
                 gradient_predivide_factor=1.0):
        if op not in (Average, Sum):
            raise ValueError(f"gradients can be reduced with op=Average or op=Sum, got op={op!r}")
        self.prescale, self.postscale = predivided_scaling(op, gradient_predivide_factor)
        self.compression = compression
        self.sparse_as_dense = bool(sparse_as_dense)
        self.op = op

    def reduce(self, gradients):
        """The reduced gradients, in order; None entries stay None."""
        reduced = list(gradients)
        dense_positions = []
        for position, gradient in enumerate(gradients):
            if gradient is None:
                continue
            if isinstance(gradient, tf.IndexedSlices) and not self.sparse_as_dense:
                reduced[position] = self._allreduce(gradient)
            else:
                reduced[position] = tf.convert_to_tensor(gradient)
                dense_positions.append(position)
        if dense_positions:
            dense = grouped_allreduce([reduced[p] for p in dense_positions], compression=self.compression,
                                      op=self.op, prescale_factor=self.prescale, postscale_factor=self.postscale)
            for position, gradient in zip(dense_positions, dense):
                reduced[position] = gradient
        return reduced

    def _allreduce(self, slices):
        return allreduce(slices, op=self.op, prescale_factor=self.prescale, postscale_factor=self.postscale)
