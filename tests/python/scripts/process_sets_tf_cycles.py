"""Process sets in lockstep.tensorflow through init/shutdown/init cycles, as in
Horovod (issue 25): static and dynamic sets work again in every cycle; a set that
is not registered (removed, or from before a shutdown) is refused while the graph
is built with Horovod's TypeError (also a ValueError); a graph built while a set
existed fails when it runs after the set is gone (InvalidArgumentError, as in
Horovod); ops from outside a set fail when they run; gradients run on the set."""

import os

import numpy as np
import tensorflow as tf
from checks import check
from rank_checks import expect_error, run_main

import lockstep.tensorflow as hvd


def run_cycle(cycle, size, stale):
    even = hvd.ProcessSet([r for r in range(size) if r % 2 == 0])
    hvd.init(process_sets=[even])
    me = hvd.rank()
    pair = hvd.add_process_set([0, 1])

    @tf.function
    def on_set(x, process_set):
        return hvd.allreduce(x, op=hvd.Sum, process_set=process_set)

    check(check_ops_and_gradients_on_sets, me, cycle, on_set, (even, pair))
    if stale:
        check(check_sets_of_the_previous_cycle_are_refused, stale)
    check(check_a_removed_set_is_refused, on_set, pair)
    hvd.barrier()
    hvd.shutdown()
    return [even, pair]


def check_ops_and_gradients_on_sets(me, cycle, on_set, process_sets):
    for process_set in process_sets:
        if process_set.included():
            total = on_set(tf.constant([float(me)]), process_set).numpy()
            assert total.tolist() == [float(sum(process_set.ranks))], (cycle, process_set, total)
            check_gradient(me, process_set, cycle)
        else:
            expect_error(tf.errors.InvalidArgumentError, ["not in"], on_set, tf.constant([1.0]), process_set)


def check_sets_of_the_previous_cycle_are_refused(stale):
    for old in stale:  # gone with its shutdown
        expect_error(TypeError, ["not registered"], hvd.allreduce, tf.constant([1.0]), process_set=old)
        expect_error(ValueError, ["not registered"], hvd.allgather, tf.constant([1.0]), process_set=old)


def check_a_removed_set_is_refused(on_set, pair):
    built = on_set.get_concrete_function(tf.TensorSpec([1], tf.float32), pair) if pair.included() else None
    hvd.remove_process_set(pair)
    expect_error(TypeError, ["not registered"], hvd.broadcast, tf.constant([1.0]), 0, process_set=pair)
    if built is not None:  # the graph still names the removed set's id
        expect_error(tf.errors.InvalidArgumentError, [], built, tf.constant([1.0]))


def check_gradient(me, process_set, cycle):
    """Gradients of set ops run on the same set (Sum's gradient is the set's size, the
    allgather's this rank's rows of the averaged output gradient)."""
    x = tf.Variable([float(me), 1.0])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(hvd.allreduce(x, op=hvd.Sum, process_set=process_set))
        total = y + tf.reduce_sum(hvd.allgather(x, process_set=process_set))
    grad = tape.gradient(total, x)
    assert grad is not None, f"no gradient on {process_set} (cycle {cycle})"
    grad = grad.numpy()
    expected = len(process_set.ranks) + 1.0
    assert np.array_equal(grad, np.full(2, expected, np.float32)), (process_set, grad)


def main():
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    stale = []
    for cycle in range(2):  # each check reports once a cycle (the previous cycle's sets: the second)
        stale = run_cycle(cycle, size, stale)


if __name__ == "__main__":
    run_main(main)
