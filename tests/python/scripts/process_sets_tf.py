"""Process sets with lockstep.tensorflow's native ops: every collective eagerly on
a set, a set's ops and global ops independent in one tf.function, gradients that
run on the forward op's set, DistributedGradientTape and broadcast_variables on a
set, the topology ops, and the error for an op from outside a set."""

import os

import numpy as np
import tensorflow as tf
from checks import check
from rank_checks import expect_error, run_main

import lockstep.tensorflow as hvd


def assert_equal(actual, expected, what):
    """Exact values; TensorFlow picks its own integer and float widths."""
    assert np.array_equal(np.asarray(actual), np.asarray(expected)), f"{what}: got {actual}, expected {expected}"


def check_eager_collectives(me, ps):
    ranks, n, mine = ps.ranks, len(ps.ranks), ps.rank()
    kw = {"process_set": ps}
    assert_equal(hvd.allreduce(tf.fill([3], me), op=hvd.Sum, **kw).numpy(), np.full(3, sum(ranks)), "allreduce")
    grouped = hvd.grouped_allreduce([tf.fill([2], float(me)), tf.fill([1], me)], op=hvd.Sum, **kw)
    assert_equal(grouped[1].numpy(), np.full(1, sum(ranks)), "grouped_allreduce")
    rows = [np.full((r + 1, 2), r, np.int32) for r in ranks]
    assert_equal(hvd.allgather(tf.constant(rows[mine]), **kw).numpy(), np.concatenate(rows), "allgather")
    gathered = hvd.grouped_allgather([tf.constant(rows[mine]), tf.constant([float(me)])], **kw)
    assert_equal(gathered[1].numpy(), np.array(ranks, np.float32), "grouped_allgather")
    assert_equal(
        hvd.broadcast(tf.constant([me]), root_rank=ranks[-1], **kw).numpy(),
        np.array([ranks[-1]]),
        "broadcast from a global root rank",
    )
    sent = tf.constant([[100 * me + dest] for dest in ranks])
    assert_equal(hvd.alltoall(sent, **kw).numpy(), np.array([[100 * src + me] for src in ranks]), "alltoall")
    scattered = hvd.reducescatter(tf.range(2 * n) * (me + 1), op=hvd.Sum, **kw)
    assert_equal(scattered.numpy(), np.arange(2 * mine, 2 * mine + 2) * sum(r + 1 for r in ranks), "reducescatter")
    shares = hvd.grouped_reducescatter([tf.fill([n, 1], me)], op=hvd.Sum, **kw)
    assert_equal(shares[0].numpy(), np.full((1, 1), sum(ranks)), "grouped_reducescatter")
    hvd.barrier(**kw)


def check_function_and_gradients(me, ps, size):
    @tf.function
    def both(x):
        return hvd.allreduce(x, op=hvd.Sum, process_set=ps), hvd.allreduce(x, op=hvd.Sum, name="world")

    in_set, in_world = both(tf.constant([float(me)]))
    assert_equal(in_set.numpy(), np.array([float(sum(ps.ranks))], np.float32), "set op in a tf.function")
    assert_equal(in_world.numpy(), np.array([float(sum(range(size)))], np.float32), "global op beside it")

    x = tf.Variable([float(me), 1.0])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(hvd.allgather(x, process_set=ps) * 2.0)
    assert_equal(tape.gradient(y, x).numpy(), np.full(2, 2.0, np.float32), "allgather gradient on the set")
    with tf.GradientTape() as tape:
        z = tf.reduce_sum(hvd.allreduce(x, op=hvd.Sum, process_set=ps))
    assert_equal(
        tape.gradient(z, x).numpy(),
        np.full(2, float(len(ps.ranks)), np.float32),
        "allreduce gradient: the Sum over the set",
    )

    w = tf.Variable([1.0, 1.0])
    with hvd.DistributedGradientTape(tf.GradientTape(), process_set=ps) as tape:
        loss = tf.reduce_sum(w * float(me + 1))
    mean = sum(r + 1 for r in ps.ranks) / len(ps.ranks)
    assert_equal(tape.gradient(loss, [w])[0].numpy(), np.full(2, mean, np.float32), "tape averages over the set")

    v = tf.Variable([float(me)])
    hvd.broadcast_variables([v], root_rank=ps.ranks[0], process_set=ps)
    assert_equal(v.numpy(), np.array([float(ps.ranks[0])], np.float32), "broadcast_variables on the set")


def check_topology_ops(mine, other):
    assert int(hvd.process_set_included_op(mine.process_set_id)) == 1
    assert int(hvd.process_set_included_op(other.process_set_id)) == 0
    assert int(hvd.size_op(mine.process_set_id)) == len(mine.ranks)
    # Horovod's code for a set that is not registered, when the op runs.
    assert int(hvd.process_set_included_op(99)) == -3
    assert int(hvd.size_op(99)) == -3


def check_op_from_outside_a_set_fails(me, other):
    expect_error(
        tf.errors.InvalidArgumentError,
        [f"rank {me} is not in it"],
        hvd.allreduce,
        tf.constant([1.0]),
        process_set=other,
    )


def check_global_op(me, size):
    assert_equal(hvd.allreduce(tf.constant([me]), op=hvd.Sum).numpy(), np.array([sum(range(size))]), "global op")


def main():
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    even = hvd.ProcessSet([r for r in range(size) if r % 2 == 0])
    hvd.init(process_sets=[even])
    odd = hvd.add_process_set([r for r in range(size) if r % 2 == 1])
    me = hvd.rank()
    mine, other = (even, odd) if me % 2 == 0 else (odd, even)
    check(check_topology_ops, mine, other)
    check(check_eager_collectives, me, mine)
    check(check_function_and_gradients, me, mine, size)
    check(check_op_from_outside_a_set_fails, me, other)
    check(check_global_op, me, size)


if __name__ == "__main__":
    run_main(main)
