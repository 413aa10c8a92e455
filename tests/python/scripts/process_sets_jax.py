"""Process sets with lockstep.jax: every collective on a set eagerly and inside
jax.jit (a set's call beside a global one in one jitted function), the gradient of
an allreduce on a set, the optax DistributedOptimizer and broadcast_parameters on a
set, and lockstep.keras' DistributedOptimizer on a set (process_sets_keras.py, with
Keras' JAX backend)."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
from checks import check
from rank_checks import run_main

import lockstep.jax as hvd


def same(actual, expected, what):
    assert np.array_equal(np.asarray(actual), np.asarray(expected)), f"{what}: got {actual}, expected {expected}"


def check_collectives(me, ps, size):
    ranks, n, mine = ps.ranks, len(ps.ranks), ps.rank()
    kw = {"process_set": ps}
    for run in (lambda f: f(), lambda f: jax.jit(f)()):  # eagerly, then traced
        same(
            run(lambda: hvd.allreduce(jnp.full(3, float(me)), op=hvd.Sum, **kw)),
            np.full(3, float(sum(ranks))),
            "allreduce",
        )
        same(
            run(lambda: hvd.grouped_allreduce({"a": jnp.full(2, float(me))}, op=hvd.Sum, **kw)["a"]),
            np.full(2, float(sum(ranks))),
            "grouped_allreduce",
        )
        same(run(lambda: hvd.allgather(jnp.array([float(me)]), **kw)), np.array(ranks, np.float32), "allgather")
        same(
            run(lambda: hvd.broadcast(jnp.array([float(me)]), root_rank=ranks[-1], **kw)),
            [float(ranks[-1])],
            "broadcast from a global root rank",
        )
        same(
            run(lambda: hvd.alltoall(jnp.array([[100.0 * me + d] for d in ranks]), **kw)),
            [[100.0 * s + me] for s in ranks],
            "alltoall",
        )
        same(
            run(lambda: hvd.reducescatter(jnp.arange(2.0 * n) * (me + 1), op=hvd.Sum, **kw)),
            np.arange(2.0 * mine, 2.0 * mine + 2) * sum(r + 1 for r in ranks),
            "reducescatter",
        )

    @jax.jit
    def both(x):
        return hvd.allreduce(x, op=hvd.Sum, **kw), hvd.allreduce(x, op=hvd.Sum, name="world")

    in_set, in_world = both(jnp.array([float(me)]))
    same(in_set, [float(sum(ranks))], "set call in a jitted function")
    same(in_world, [float(sum(range(size)))], "global call beside it")
    grad = jax.jit(jax.grad(lambda x: jnp.sum(hvd.allreduce(x, op=hvd.Sum, **kw))))(jnp.ones(2))
    same(grad, np.full(2, float(n)), "allreduce gradient: the Sum over the set")
    hvd.barrier(**kw)


def check_optimizer(me, ps):
    params = hvd.broadcast_parameters({"w": jnp.full(2, float(me))}, root_rank=ps.ranks[0], process_set=ps)
    same(params["w"], np.full(2, float(ps.ranks[0])), "broadcast_parameters on the set")
    tx = hvd.DistributedOptimizer(optax.sgd(1.0), process_set=ps)
    state = tx.init(params)
    updates, _ = jax.jit(tx.update)({"w": jnp.full(2, float(me + 1))}, state)
    mean = sum(r + 1 for r in ps.ranks) / len(ps.ranks)
    same(updates["w"], np.full(2, -mean, np.float32), "updates from gradients averaged over the set")


def main():
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    hvd.init()
    even = hvd.add_process_set([r for r in range(size) if r % 2 == 0])
    odd = hvd.add_process_set([r for r in range(size) if r % 2 == 1])
    me = hvd.rank()
    mine, other = (even, odd) if me % 2 == 0 else (odd, even)
    check(check_collectives, me, mine, size)
    check(check_optimizer, me, mine)
    check(check_traced_op_on_another_set_is_refused, me, other)
    # lockstep.keras' optimizer on the same set, on Keras' JAX backend, in this launch:
    # starting JAX on 4 ranks costs more than the check.
    os.environ.setdefault("KERAS_BACKEND", "jax")
    from process_sets_keras import check_optimizer_on_a_set

    check(check_optimizer_on_a_set, me, mine)
    hvd.barrier()  # nobody exits (and so shuts down) while others still run set ops


def check_traced_op_on_another_set_is_refused(me, other):
    try:
        jax.jit(lambda x: hvd.allreduce(x, process_set=other))(jnp.ones(1))
    except ValueError as error:
        assert f"rank {me} is not in process set" in str(error), str(error)
    else:
        raise AssertionError("a traced op on a set without this rank was accepted")


if __name__ == "__main__":
    run_main(main)
