"""Averaging a list of gradients over ranks: what DistributedGradientTape and the
Keras DistributedOptimizer (TensorFlow backend) both do before an update."""

import tensorflow as tf

from lockstep.common.ops import Average, check_linear_op, predivided_scaling
from lockstep.common.process_sets import membership
from lockstep.tensorflow.compression import Compression
from lockstep.tensorflow.mpi_ops import grouped_allreduce


class GradientReducer:
    """Reduces gradient lists with fixed settings.

    Dense gradients go out as one grouped allreduce (one negotiation, fused);
    tf.IndexedSlices (e.g. from embeddings) as one grouped allgather of values and
    indices, or densified first with sparse_as_dense=True, which pays off when most rows are touched
    anyway. gradient_predivide_factor f splits the averaging into a division by f
    before the sum and by size/f after it, which keeps low-precision sums in range.
    """

    def __init__(
        self,
        compression=Compression.none,
        sparse_as_dense=False,
        op=Average,
        gradient_predivide_factor=1.0,
        process_set=None,
        scale_local_gradients=True,
    ):
        op = check_linear_op(op, "gradient reduction")
        self.prescale, self.postscale = predivided_scaling(op, gradient_predivide_factor)
        self.compression = compression
        self.sparse_as_dense = bool(sparse_as_dense)
        self.op = op
        self.process_set = process_set  # None: all ranks
        # Horovod divides rank-local gradients by the set's size, so that they come
        # from the same (averaged) loss as the reduced ones.
        self.scale_local_gradients = bool(scale_local_gradients)

    def reduce(self, gradients, keep_local=None):
        """The reduced gradients, in order. None entries stay None, and so do the
        entries whose keep_local flag is set (gradients of rank-local variables),
        divided by the process set's size with scale_local_gradients (Horovod's
        default). On a rank outside the process set, as in Horovod, nothing is
        communicated and the other gradients stay this rank's own."""
        reduced = self._scaled_locals(gradients, keep_local)
        if not self.communicates():
            return reduced
        sparse, dense = [], []
        for position, gradient in enumerate(gradients):
            if gradient is None or (keep_local and keep_local[position]):
                continue
            if isinstance(gradient, tf.IndexedSlices) and not self.sparse_as_dense:
                sparse.append(position)
            else:
                reduced[position] = tf.convert_to_tensor(gradient)
                dense.append(position)
        if sparse:
            # Gathered slices are exact, so the predivide split (a guard for dense
            # low-precision sums) does not apply: a plain Average or Sum.
            self._reduce_into(reduced, sparse, op=self.op)
        if dense:
            self._reduce_into(
                reduced,
                dense,
                compression=self.compression,
                op=self.op,
                prescale_factor=self.prescale,
                postscale_factor=self.postscale,
            )
        return reduced

    def _scaled_locals(self, gradients, keep_local):
        reduced = list(gradients)
        if not (keep_local and any(keep_local) and self.scale_local_gradients):
            return reduced
        set_size = membership(self.process_set)[0]
        for position, gradient in enumerate(gradients):
            if gradient is None or not keep_local[position]:
                continue
            if isinstance(gradient, tf.IndexedSlices):
                reduced[position] = tf.IndexedSlices(gradient.values / set_size, gradient.indices, gradient.dense_shape)
            else:
                reduced[position] = gradient / set_size
        return reduced

    def communicates(self):
        """False on a rank outside the process set (asked when the gradients are
        reduced: the set must be registered by then, not when the reducer is made)."""
        return self.process_set is None or membership(self.process_set)[1]

    def _reduce_into(self, reduced, positions, **options):
        results = grouped_allreduce([reduced[p] for p in positions], process_set=self.process_set, **options)
        for position, result in zip(positions, results):
            reduced[position] = result


def variable_key(variable):
    """Variables are unhashable as values; key them by identity of the underlying
    TensorFlow variable (a Keras 3 Variable wraps one in `.value`)."""
    inner = getattr(variable, "_value", None)
    return id(inner) if isinstance(inner, tf.Variable) else id(variable)
