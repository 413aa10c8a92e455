"""Horovod's backward_passes_per_step for the Keras DistributedOptimizer: add up
the gradients of k batches on each rank, and communicate and update on every
k-th batch only. The other batches only count (optimizer.iterations advances on
every batch, as in Horovod). The sums are summed over ranks (Average divides by
the ranks as usual), then divided by k with average_aggregated_gradients=True.

After each update the sums restart from zeros, not by subtracting what was
added: a non-finite gradient (an overflow under mixed precision) spoils the one
update it belongs to, as in Horovod (its issue 3504), instead of every later one.

Keras 3: Keras' own gradient accumulation (gradient_accumulation_steps) keeps
the sums in optimizer variables on every backend, including JAX's stateless
step; the wrapper reduces inside its update branch. Keras 2 (tf-keras): the sums
are tf.Variables of the wrapper, and a tf.cond picks the branch.
"""

from lockstep.keras import keras_line


def keras3_accumulation_config(config, passes):
    """The optimizer config with Keras' accumulation over `passes` batches."""
    if config.get("gradient_accumulation_steps"):
        raise ValueError(
            f"the optimizer already accumulates gradients (gradient_accumulation_steps="
            f"{config['gradient_accumulation_steps']}); use that or backward_passes_per_step, not both"
        )
    return {**config, "gradient_accumulation_steps": passes}


def reduce_accumulated(optimizer, reducer, grads, settings, keep_local=None):
    """Reduce Keras 3's accumulated gradients (the mean of the k batches) on an update step."""
    passes = settings.backward_passes_per_step

    def communicate(values):
        reduced = reducer.reduce(list(values), keep_local)
        if not settings.average_aggregated_gradients:
            reduced = [grad * passes for grad in reduced]  # Horovod sums the batches by default
        return reduced

    if keras_line.backend_name() != "jax":
        return communicate(grads)  # Keras calls this in the update branch only
    import jax

    # JAX computes both branches' values and selects; communicate in the update one only.
    is_update_step = (optimizer._iterations + 1) % passes == 0  # noqa: SLF001 - Keras' own test
    return jax.lax.cond(is_update_step, communicate, list, list(grads))


class Keras2Aggregation:
    """The sums and the batch counter of one Keras 2 optimizer: Horovod's
    `optimizer._agg_helper`, whose `counter` (a tf.Variable) holds the batches added
    up since the last update (0 right after one)."""

    def __init__(self, passes, average):
        self.passes = passes
        self.average = average
        self.counter = None
        self.sums = None

    def apply(self, optimizer, grads, variables, reducer, apply_reduced, keep_local=None):
        import tensorflow as tf

        grads = [_dense(grad) for grad in grads]
        # Slots made now, outside the branches (a tf.function must not make them in a tf.cond).
        keras_line.build_optimizer(optimizer, variables)
        self._make_sums(grads, variables)
        added = [total.assign_add(grad) for total, grad in zip(self.sums, grads) if grad is not None]
        with tf.control_dependencies(added):
            count = self.counter.assign_add(1)

        def communicate():
            totals = [None if total is None else total.read_value() for total in self.sums]
            reduced = reducer.reduce(totals, keep_local)
            if self.average:
                reduced = [None if grad is None else grad / self.passes for grad in reduced]
            with tf.control_dependencies([apply_reduced(reduced)]):
                return self._restart()

        def count_only():
            with tf.control_dependencies([optimizer.iterations.assign_add(1)]):
                return tf.constant(False)

        return tf.cond(tf.equal(count, self.passes), communicate, count_only)

    def _make_sums(self, grads, variables):
        if self.sums is not None:
            return
        import tensorflow as tf

        with tf.init_scope():  # once, eagerly, even when first called inside a tf.function
            self.counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="lockstep_aggregation_counter")
            self.sums = [
                None
                if grad is None
                else tf.Variable(
                    tf.zeros(variable.shape, grad.dtype), trainable=False, name="lockstep_aggregated_gradient"
                )
                for grad, variable in zip(grads, variables)
            ]

    def _restart(self):
        import tensorflow as tf

        cleared = [total.assign(tf.zeros_like(total)) for total in self.sums if total is not None]
        with tf.control_dependencies(cleared):
            cleared.append(self.counter.assign(0))
        with tf.control_dependencies(cleared):
            return tf.constant(True)


def _dense(grad):
    import tensorflow as tf

    # Horovod refuses sparse gradients here unless sparse_as_dense; a sum of slices
    # is dense anyway, so lockstep densifies them.
    return tf.convert_to_tensor(grad) if isinstance(grad, tf.IndexedSlices) else grad
