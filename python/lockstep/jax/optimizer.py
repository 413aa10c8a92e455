"""Data-parallel training with optax: DistributedOptimizer averages gradients
across ranks inside the (jitted) update, broadcast_parameters starts every rank
from the same parameters and optimizer state."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from lockstep.common import validation
from lockstep.common.ops import Average, Sum, predivided_scaling
from lockstep.common.process_sets import global_process_set
from lockstep.jax import mpi_ops
from lockstep.jax.compression import Compression


class AccumulationState(NamedTuple):
    """State of a DistributedOptimizer with backward_passes_per_step > 1."""

    inner: Any  # the wrapped transformation's state
    accumulated: Any  # this rank's gradient sum since the last reduction
    passes: jax.Array  # backward passes accumulated so far (int32 scalar)


def DistributedOptimizer(optimizer, backward_passes_per_step=1, gradient_predivide_factor=1.0, op=Average,
                         name=None, compression=Compression.none, process_set=global_process_set):
    """Wrap an optax GradientTransformation so that `update` first reduces the
    gradient pytree across ranks (one grouped allreduce, fused by the core), then
    applies `optimizer`. Works eagerly and inside jax.jit.

    backward_passes_per_step=k: gradients of k calls are summed locally (as torch
    accumulates .grad) and reduced and applied on every k-th call; the other calls
    return zero updates. gradient_predivide_factor f: the sum is taken of grads / f
    and multiplied by f / size afterwards (op=Average only). compression
    (Compression.fp16, .bf16): floating gradients travel in the narrower type.
    process_set: reduce over its ranks only."""
    if op not in (Average, Sum):
        raise ValueError(f"gradients can be reduced with op=Average or op=Sum, got op={op!r}")
    prescale, postscale = predivided_scaling(op, gradient_predivide_factor)
    passes = validation.as_int(backward_passes_per_step, "backward_passes_per_step")
    if passes < 1:
        raise ValueError(f"backward_passes_per_step must be at least 1, got {passes}")

    def reduce(grads):
        return mpi_ops.reduce_pytree(grads, name, compression, op, prescale, postscale, process_set,
                                     in_place=True)

    if passes == 1:
        def update(grads, state, params=None):
            return optimizer.update(reduce(grads), state, params)

        return optax.GradientTransformation(optimizer.init, update)
    return _accumulating(optimizer, passes, reduce)


def _accumulating(optimizer, passes, reduce):
    def init(params):
        return AccumulationState(optimizer.init(params), jax.tree.map(jnp.zeros_like, params),
                                 jnp.zeros([], jnp.int32))

    def update(grads, state, params=None):
        accumulated = jax.tree.map(jnp.add, state.accumulated, grads)
        count = state.passes + 1

        # Every rank takes the same branch (the counts agree), so the reduction inside
        # `apply` runs on all ranks or on none.
        def apply(_):
            updates, inner = optimizer.update(reduce(accumulated), state.inner, params)
            return updates, AccumulationState(inner, jax.tree.map(jnp.zeros_like, accumulated),
                                              jnp.zeros([], jnp.int32))

        def skip(_):
            return jax.tree.map(jnp.zeros_like, grads), AccumulationState(state.inner, accumulated, count)

        return jax.lax.cond(count >= passes, apply, skip, None)

    return optax.GradientTransformation(init, update)


def broadcast_parameters(params, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's pytree (parameters, optimizer state...) on every rank (of the set;
    root_rank is a global rank); returns the pytree. Eagerly one broadcast per leaf;
    inside jit one grouped call."""
    leaves, tree = jax.tree_util.tree_flatten(params)
    if not leaves:
        return params
    leaves = [jnp.asarray(leaf) for leaf in leaves]
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        received = mpi_ops.grouped_broadcast(leaves, root_rank, name=name, process_set=process_set)
    else:
        base = None if name is None else validation.check_name(name)
        received = [mpi_ops.broadcast(leaf, root_rank, name=None if base is None else f"{base}.{i}",
                                      process_set=process_set) for i, leaf in enumerate(leaves)]
    return jax.tree_util.tree_unflatten(tree, received)


broadcast_optimizer_state = broadcast_parameters
