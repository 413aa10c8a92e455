"""A Horovod TensorFlow script (only the import changed) training with a process set
that leaves rank 1 out: DistributedGradientTape (eagerly and in a tf.function) and
the legacy tf.compat.v1 DistributedOptimizer average over the set's ranks, and on
rank 1, outside it, communicate nothing and hand back rank 1's own gradients, as
Horovod does. An allreduce on a process set id that does not exist raises
ValueError. Each is a named check (scripts/checks.py)."""

import numpy as np
import tensorflow as tf
from checks import check
from rank_checks import expect_error, run_main

import lockstep.tensorflow as hvd  # was: import horovod.tensorflow as hvd


def loss_of(w, rank):
    return tf.reduce_sum(w * float(rank + 1))


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    members = [r for r in range(size) if r != 1]
    workers = hvd.add_process_set(members)
    w = tf.Variable([1.0, 2.0])
    # d loss / d w = rank + 1 on every rank; the set's average, or rank 1's own.
    expected = np.mean([r + 1 for r in members]) if rank in members else float(rank + 1)
    check(check_tape_on_a_set, rank, workers, w, expected)
    check(check_tape_in_a_tf_function, rank, workers, w, expected)
    check(check_legacy_optimizer_on_a_set, rank, workers, w, expected)
    check(check_process_set_errors, rank, members, workers)
    check(check_global_op_after_the_sets, size)
    hvd.remove_process_set(workers)


def check_tape_on_a_set(rank, workers, w, expected):
    for step in range(2):
        with tf.GradientTape() as tape:
            loss = loss_of(w, rank)
        tape = hvd.DistributedGradientTape(tape, process_set=workers)
        (gradient,) = tape.gradient(loss, [w])
        assert np.allclose(gradient.numpy(), [expected] * 2), f"tape step {step}: {gradient.numpy()} != {expected}"


def check_tape_in_a_tf_function(rank, workers, w, expected):
    @tf.function
    def compiled_step():
        with tf.GradientTape() as tape:
            loss = loss_of(w, rank)
        tape = hvd.DistributedGradientTape(tape, process_set=workers)
        return tape.gradient(loss, [w])[0]

    for step in range(2):
        gradient = compiled_step()
        assert np.allclose(gradient.numpy(), [expected] * 2), f"tf.function step {step}: {gradient.numpy()}"


def check_legacy_optimizer_on_a_set(rank, workers, w, expected):
    optimizer = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.5), process_set=workers)
    pairs = optimizer.compute_gradients(lambda: loss_of(w, rank), var_list=[w])
    assert np.allclose(pairs[0][0].numpy(), [expected] * 2), f"compute_gradients: {pairs[0][0].numpy()}"
    optimizer.apply_gradients(pairs)
    assert np.allclose(w.numpy(), [1.0 - 0.5 * expected, 2.0 - 0.5 * expected]), f"after the update: {w.numpy()}"


def check_process_set_errors(rank, members, workers):
    # Horovod's test_horovod_allreduce_process_set_id_error: a made-up id is a ValueError.
    fake_set = hvd.ProcessSet([0])
    fake_set.process_set_id = 10  # as Horovod's test says: you should not do this
    expect_error(ValueError, ["10"], hvd.allreduce, tf.ones(4), process_set=fake_set)
    if rank not in members:
        # A registered set this rank is not in: an error from the op, as in Horovod.
        expect_error(tf.errors.InvalidArgumentError, ["not in"], hvd.allreduce, tf.ones(4), process_set=workers)


def check_global_op_after_the_sets(size):
    total = hvd.allreduce(tf.constant([1.0]), op=hvd.Sum, name="after.sets")
    assert total.numpy().tolist() == [float(size)], f"global allreduce after the set's steps: {total.numpy()}"


if __name__ == "__main__":
    run_main(main)
