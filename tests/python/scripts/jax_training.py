"""lockstep.jax training under mpirun: DistributedOptimizer inside a jitted step
matches single-process training on the full batch (also with
backward_passes_per_step, gradient_predivide_factor and gradient buckets),
broadcast_parameters, gradients reduced in place,
the core fusing a gradient pytree reduced in one call, and alltoall's received
splits without jax_enable_x64; then jax_errors.py's checks."""

import os
import tempfile

import jax
import jax.numpy as jnp
import jax_errors
import numpy as np
import optax
from checks import check
from rank_checks import assert_equal, run_main
from timeline_checks import fused_share, read_timeline

import lockstep.jax as hvd

FEATURES, HIDDEN, CLASSES, PER_RANK = 6, 16, 3, 8


def init_params(seed):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return {
        "dense1": {"w": jax.random.normal(k1, (FEATURES, HIDDEN)) * 0.3, "b": jnp.zeros(HIDDEN)},
        "dense2": {"w": jax.random.normal(k2, (HIDDEN, CLASSES)) * 0.3, "b": jnp.zeros(CLASSES)},
    }


def loss_fn(params, x, y):
    hidden = jnp.tanh(x @ params["dense1"]["w"] + params["dense1"]["b"])
    logits = hidden @ params["dense2"]["w"] + params["dense2"]["b"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def batches(size, steps):
    """The same global batches on every rank; rank r trains on rows [r*PER_RANK, (r+1)*PER_RANK)."""
    rng = np.random.default_rng(7)
    for _ in range(steps):
        x = rng.normal(size=(PER_RANK * size, FEATURES)).astype(np.float32)
        yield jnp.asarray(x), jnp.asarray((x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0.5))


def make_step(tx):
    @jax.jit
    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    return step


def shard(x, rank):
    return x[rank * PER_RANK : (rank + 1) * PER_RANK]


def check_broadcast_parameters(rank, size):
    params = hvd.broadcast_parameters(init_params(seed=100 + rank), root_rank=0)
    jax.tree.map(
        lambda a, e: assert_equal(np.asarray(a), np.asarray(e), "broadcast_parameters"), params, init_params(seed=100)
    )
    state = optax.adam(1e-2).init(params)
    state = jax.jit(lambda s: hvd.broadcast_parameters(s, root_rank=size - 1))(state)
    assert jax.tree.structure(state) == jax.tree.structure(optax.adam(1e-2).init(params)), "state pytree kept"
    return params


# The full-batch runs by (id(params), size, passes, steps): they do not depend on the
# distributed options (predivide, buckets), so the checks that differ only in those
# share one (each run costs a compile on every rank).
_FULL_BATCH = {}


def full_batch_training(size, params, passes, steps):
    key = (id(params), size, passes, steps)
    if key not in _FULL_BATCH:
        inner = optax.adam(1e-2)
        ref_tx = optax.MultiSteps(inner, every_k_schedule=passes) if passes > 1 else inner
        ref_step = make_step(ref_tx)
        ref_params, ref_state = params, ref_tx.init(params)
        for x, y in batches(size, steps):
            ref_params, ref_state, _ = ref_step(ref_params, ref_state, x, y)
        _FULL_BATCH[key] = (params, ref_params)  # params kept alive: its id stays unique
    return _FULL_BATCH[key][1]


def check_matches_full_batch(rank, size, params, passes=1, predivide=1.0, steps=6, bucket_bytes=None):
    inner = optax.adam(1e-2)
    dist_step = make_step(
        hvd.DistributedOptimizer(
            inner, backward_passes_per_step=passes, gradient_predivide_factor=predivide, bucket_bytes=bucket_bytes
        )
    )
    dist_params, dist_state = params, hvd.DistributedOptimizer(inner, backward_passes_per_step=passes).init(params)
    for x, y in batches(size, steps):
        dist_params, dist_state, _ = dist_step(dist_params, dist_state, shard(x, rank), shard(y, rank))
    ref_params = full_batch_training(size, params, passes, steps)
    what = (
        f"DistributedOptimizer(passes={passes}, predivide={predivide}, bucket_bytes={bucket_bytes}) "
        "vs full-batch training"
    )
    # MultiSteps averages the accumulated gradients, lockstep sums them (as torch's .grad
    # does); Adam is invariant to that constant factor up to its epsilon.
    jax.tree.map(
        lambda a, e: np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=2e-4, atol=2e-5, err_msg=what),
        dist_params,
        ref_params,
    )
    moved = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(dist_params), jax.tree.leaves(params)))
    assert moved > 1e-3, f"{what}: parameters did not train"
    gathered = hvd.allgather_object([np.asarray(leaf) for leaf in jax.tree.leaves(dist_params)])
    for other in gathered:
        for a, b in zip(other, gathered[0]):
            assert_equal(a, b, f"{what}: every rank holds identical parameters")


def check_gradient_pytree_is_fused(rank, size, params):
    step = make_step(hvd.DistributedOptimizer(optax.sgd(0.1), name="fused_grads"))
    state = optax.sgd(0.1).init(params)
    x, y = next(batches(size, 1))
    jax.block_until_ready(step(params, state, shard(x, rank), shard(y, rank)))  # compile and run before recording
    path = os.path.join(tempfile.gettempdir(), f"lockstep_jax_fusion_{os.getpid()}.json")
    hvd.start_timeline(path)
    for _ in range(3):
        params, state, _ = step(params, state, shard(x, rank), shard(y, rank))
    jax.block_until_ready(params)  # JAX dispatches asynchronously: let the steps finish
    hvd.stop_timeline()
    if rank != 0:
        return
    events = read_timeline(path)
    os.remove(path)
    share, launches = fused_share(events, "fused_grads.")
    leaves = len(jax.tree.leaves(params))
    assert launches == 3 * leaves, f"timeline shows {launches} allreduces, expected {3 * leaves}"
    assert share == 1.0, f"only {share:.0%} of a gradient pytree reduced in one call were fused"
    print(f"rank {rank}: all {leaves} gradients of each jitted step fused", flush=True)


def check_in_place_reduction(rank, size, params):
    """DistributedOptimizer reduces the gradients in buckets (one custom call each), in
    their own buffers (the calls' outputs alias their inputs); bucket_bytes must be
    positive; a pytree reduced in place whose leaves are still read afterwards keeps
    those leaves intact (XLA copies them first)."""
    from lockstep.jax import mpi_ops

    x, y = next(batches(size, 1))
    leaves = len(jax.tree.leaves(params))
    # One call by default; the test model's gradients fit one 4 MiB bucket; bucket_bytes=1 gives each its own.
    for bucket_bytes, expected in ((None, 1), (4 << 20, 1), (1, leaves)):
        tx = hvd.DistributedOptimizer(optax.sgd(0.1), bucket_bytes=bucket_bytes)
        hlo = make_step(tx).lower(params, tx.init(params), shard(x, rank), shard(y, rank)).as_text()
        calls = [line for line in hlo.splitlines() if "lockstep_collective" in line]
        assert len(calls) == expected and all("output_operand_aliases" in c for c in calls), (
            f"bucket_bytes={bucket_bytes}: expected {expected} aliased custom call(s):\n" + "\n".join(calls)
        )
    for bad in (0, -5):
        try:
            hvd.DistributedOptimizer(optax.sgd(0.1), bucket_bytes=bad)
        except ValueError as error:
            assert "bucket_bytes" in str(error), error
        else:
            raise AssertionError(f"bucket_bytes={bad} must raise ValueError")

    @jax.jit
    def reduce_and_reuse(tree):
        doubled = jax.tree.map(lambda v: v * 2, tree)
        reduced = mpi_ops.reduce_pytree(
            doubled, None, hvd.Compression.none, hvd.Sum, 1.0, 1.0, hvd.global_process_set, in_place=True
        )
        return reduced, jax.tree.map(lambda v: v + 1, doubled)  # the inputs, read after the call

    mine = {"a": jnp.full((4, 3), rank + 1.0), "b": jnp.arange(5.0) * (rank + 1)}
    for _ in range(2):
        reduced, reused = reduce_and_reuse(mine)
        total = size * (size + 1)  # sum over ranks of 2 * (rank + 1)
        assert_equal(np.asarray(reduced["a"]), np.full((4, 3), total, np.float32), "in-place group, member a")
        assert_equal(np.asarray(reduced["b"]), (np.arange(5.0) * total).astype(np.float32), "in-place group, member b")
        assert_equal(np.asarray(reused["a"]), np.full((4, 3), 2 * (rank + 1) + 1, np.float32), "input read after")
        assert_equal(
            np.asarray(reused["b"]), (np.arange(5.0) * 2 * (rank + 1) + 1).astype(np.float32), "input read after"
        )
    print(f"rank {rank}: gradients reduced in place, in buckets", flush=True)


def check_alltoall_splits_without_x64(rank, size):
    assert not jax.config.jax_enable_x64
    splits = [1 + (rank + d) % 2 for d in range(size)]
    received = [1 + (s + rank) % 2 for s in range(size)]
    x = jnp.full((sum(splits), 2), rank, jnp.float32)
    out, got = jax.jit(lambda x: hvd.alltoall(x, splits=splits, received_splits=received))(x)
    expected = np.concatenate([np.full((received[s], 2), s, np.float32) for s in range(size)])
    assert_equal(np.asarray(out), expected, "jit alltoall with splits (no x64)")
    assert_equal(np.asarray(got), np.array(received, np.int32), "jit alltoall received splits (no x64)")


def check_compression(rank, size, params):
    """Compression.fp16/.bf16 send floating tensors in the narrow type (a third is not
    exact in either, so the result shows which type travelled) and return the
    caller's dtype; integer tensors are untouched; the optimizer trains with it."""
    third = jnp.full(3, 1 / 3, jnp.float32)
    for compression, wire in ((hvd.Compression.fp16, np.float16), (hvd.Compression.bf16, jnp.bfloat16)):
        expected = np.asarray(np.full(3, 1 / 3, np.float32).astype(wire)).astype(np.float32) * size
        expected = expected.astype(wire).astype(np.float32)
        for wrap, how in ((lambda f: f, "eager"), (jax.jit, "jit")):
            out = wrap(lambda v: hvd.allreduce(v, op=hvd.Sum, compression=compression))(third)
            assert out.dtype == jnp.float32, f"{compression.__name__} {how}: dtype {out.dtype}"
            assert_equal(np.asarray(out), expected, f"{compression.__name__} allreduce ({how})")
            group = wrap(
                lambda v: hvd.grouped_allreduce({"f": v, "i": jnp.arange(3)}, op=hvd.Sum, compression=compression)
            )(third)
            assert_equal(np.asarray(group["f"]), expected, f"{compression.__name__} grouped ({how})")
            assert_equal(
                np.asarray(group["i"]),
                (np.arange(3) * size).astype(np.int32),
                f"{compression.__name__} integer member ({how})",
            )
    try:
        hvd.allreduce(third, compression="fp16")
    except TypeError as error:
        assert "compression" in str(error), error
    else:
        raise AssertionError("a compression that is not a compressor must raise TypeError")

    tx = hvd.DistributedOptimizer(optax.sgd(0.1), compression=hvd.Compression.fp16)
    step = make_step(tx)
    trained, state = params, tx.init(params)
    for x, y in batches(size, 3):
        trained, state, _ = step(trained, state, shard(x, rank), shard(y, rank))
    gathered = hvd.allgather_object([np.asarray(leaf) for leaf in jax.tree.leaves(trained)])
    for other in gathered:
        for a, b in zip(other, gathered[0]):
            assert_equal(a, b, "fp16-compressed DistributedOptimizer: identical parameters on every rank")
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(trained)), "parameters stay float32"


def main():
    # jax_errors.py's checks share this launch (JAX's start-up and compiles on every
    # rank cost more than they do): use before init() first, the rest after training.
    check(jax_errors.check_use_before_init_fails)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    params = check(check_broadcast_parameters, rank, size)
    full_batch = check_matches_full_batch
    check("matches_full_batch", full_batch, rank, size, params)
    check("matches_full_batch_predivided", full_batch, rank, size, params, predivide=float(size))
    check("matches_full_batch_two_passes", full_batch, rank, size, params, passes=2, steps=6)
    check("matches_full_batch_one_call_per_gradient", full_batch, rank, size, params, bucket_bytes=1)
    # Uneven buckets in lax.cond, then one bucket that holds them all.
    check("matches_full_batch_uneven_buckets", full_batch, rank, size, params, passes=2, steps=4, bucket_bytes=300)
    check("matches_full_batch_one_bucket", full_batch, rank, size, params, bucket_bytes=4 << 20)
    check(check_gradient_pytree_is_fused, rank, size, params)
    check(check_in_place_reduction, rank, size, params)
    check(check_compression, rank, size, params)
    check(check_alltoall_splits_without_x64, rank, size)
    jax_errors.check_errors(rank, size)  # named checks of their own
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
