"""A grouped allreduce whose name comes back with different members: the core
must renegotiate the whole group, whether or not some members are in its
response cache (a regression test: see test_tf_collectives.py)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_inter_op_parallelism_threads(2)
tf.config.threading.set_intra_op_parallelism_threads(1)

from rank_checks import assert_equal, run_main  # noqa: E402

import lockstep.tensorflow as hvd  # noqa: E402


def make_train_step():
    # Two functions with one Python name build the same graph names, as two
    # Keras models trained one after the other in one process do.
    @tf.function
    def train_step(tensors):
        return hvd.grouped_allreduce(tensors, op=hvd.Sum)

    return train_step


def check_group(results, tensors, size, what):
    for index, (result, tensor) in enumerate(zip(results, tensors)):
        assert_equal(result.numpy(), tensor.numpy() * size, f"{what} member {index}")


def main():
    hvd.init()
    size = hvd.size()
    first = [tf.ones([4]), tf.ones([3])]
    check_group(make_train_step()(first), first, size, "first model")
    # Same member count, one member with a new shape: member .1 is cached, .0 is not.
    second = [tf.ones([5]), tf.ones([3])]
    check_group(make_train_step()(second), second, size, "second model")
    # A user-named group that grows between calls.
    grown = [tf.constant(np.arange(3, dtype=np.float32))]
    check_group(hvd.grouped_allreduce(grown, op=hvd.Sum, name="named.group"), grown, size, "named group of 1")
    grown.append(tf.ones([2]))
    check_group(hvd.grouped_allreduce(grown, op=hvd.Sum, name="named.group"), grown, size, "named group of 2")
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
