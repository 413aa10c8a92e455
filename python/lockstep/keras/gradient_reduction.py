"""Picks how gradients are averaged for the active Keras backend.

TensorFlow: lockstep.tensorflow's GradientReducer (works inside the compiled
train step). Torch: one grouped allreduce through lockstep.torch. JAX: one
grouped allreduce through lockstep.jax, which inside the jitted train step of
model.fit (optimizer.stateless_apply calls apply) is one fused XLA custom call.
All return a list in the same order with None entries kept.
"""

from lockstep.common.ops import check_linear_op, predivided_scaling
from lockstep.common.process_sets import global_process_set, membership
from lockstep.keras.compression import resolve
from lockstep.keras.keras_line import backend_name

SUPPORTED_BACKENDS = ("tensorflow", "torch", "jax")


def make_gradient_reducer(
    compression, sparse_as_dense, op, gradient_predivide_factor, process_set=None, scale_local_gradients=True
):
    """process_set: None or global_process_set for all ranks, or a registered set.
    scale_local_gradients: divide the gradients kept local (reduce()'s keep_local)
    by the set's size, as Horovod does."""
    backend = backend_name()
    if backend == "tensorflow":
        from lockstep.tensorflow.compression import Compression as TensorflowCompression
        from lockstep.tensorflow.gradient_reduction import GradientReducer

        return GradientReducer(
            resolve(compression, TensorflowCompression),
            sparse_as_dense,
            op,
            gradient_predivide_factor,
            process_set,
            scale_local_gradients,
        )
    process_set = global_process_set if process_set is None else process_set
    if backend == "torch":
        reducer = TorchGradientReducer(compression, op, gradient_predivide_factor, process_set)
    elif backend == "jax":
        reducer = JaxGradientReducer(compression, op, gradient_predivide_factor, process_set)
    else:
        reducer = None
    if reducer is not None:
        reducer.scale_local_gradients = bool(scale_local_gradients)
        return reducer
    raise ValueError(
        f"lockstep.keras supports the {', '.join(SUPPORTED_BACKENDS)} Keras backends, not {backend!r} "
        "(set KERAS_BACKEND before importing keras)"
    )


class TorchGradientReducer:
    """Averages torch gradients with one grouped allreduce (Keras' torch backend
    produces dense gradients only)."""

    def __init__(self, compression, op, gradient_predivide_factor, process_set):
        import lockstep.torch

        self._frontend = lockstep.torch
        self._init(resolve(compression, lockstep.torch.Compression), op, gradient_predivide_factor, process_set)

    def _init(self, compression, op, gradient_predivide_factor, process_set):
        self.process_set = process_set
        self.compression = compression
        self.op = check_linear_op(op, "DistributedOptimizer")
        self.prescale, self.postscale = predivided_scaling(op, gradient_predivide_factor)

    scale_local_gradients = True

    def reduce(self, gradients, keep_local=None):
        reduced = list(gradients)
        positions = [position for position, gradient in enumerate(gradients) if gradient is not None]
        if keep_local:
            set_size = membership(self.process_set)[0] if self.scale_local_gradients else 1
            for position in positions:
                if keep_local[position] and set_size != 1:
                    reduced[position] = gradients[position] / set_size
            positions = [position for position in positions if not keep_local[position]]
        if not positions or not membership(self.process_set)[1]:  # outside the set: local, as in Horovod
            return reduced
        outputs = self._allreduce([gradients[p] for p in positions])
        for position, output in zip(positions, outputs):
            reduced[position] = output
        return reduced

    def _allreduce(self, tensors):
        return self._frontend.grouped_allreduce(
            tensors,
            compression=self.compression,
            op=self.op,
            prescale_factor=self.prescale,
            postscale_factor=self.postscale,
            process_set=self.process_set,
        )


class JaxGradientReducer(TorchGradientReducer):
    """Averages JAX gradients with one grouped allreduce (traced inside model.fit's
    jitted step, eager otherwise)."""

    def __init__(self, compression, op, gradient_predivide_factor, process_set):
        import lockstep.jax

        self._frontend = lockstep.jax
        self._init(resolve(compression, lockstep.jax.Compression), op, gradient_predivide_factor, process_set)

    def _allreduce(self, tensors):
        from lockstep.jax import mpi_ops

        # Inside the jitted step the gradients are dead once reduced: reduce in their buffers.
        return mpi_ops.reduce_pytree(
            tensors, None, self.compression, self.op, self.prescale, self.postscale, self.process_set, in_place=True
        )
