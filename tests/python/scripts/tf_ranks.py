"""Rank script for lockstep.tensorflow: every check in one launch, because
importing TensorFlow dominates the run time."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

# Two ranks share two cores here; more TF threads per rank only thrash.
tf.config.threading.set_inter_op_parallelism_threads(2)
tf.config.threading.set_intra_op_parallelism_threads(1)

from checks import check  # noqa: E402
from rank_checks import expect_error, run_main  # noqa: E402
from tf_collective_checks import check_collectives  # noqa: E402
from tf_gradient_checks import check_collective_gradients, check_gradient_errors  # noqa: E402
from tf_graph_checks import (  # noqa: E402
    check_broadcast_variables,
    check_errors,
    check_independent_allreduces_fuse,
    check_join_and_barrier,
    check_tf1_session_hook,
)
from tf_native_checks import check_native_ops  # noqa: E402
from tf_tape_checks import check_distributed_gradient_tape, check_tape_as_context_manager  # noqa: E402

import lockstep.tensorflow as hvd  # noqa: E402


def check_object_collectives(rank, size):
    assert hvd.broadcast_object({"from": rank}, root_rank=0) == {"from": 0}, "broadcast_object"
    assert hvd.allgather_object(rank * 2) == [r * 2 for r in range(size)], "allgather_object"


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check(check_collectives, rank, size)
    check(check_collective_gradients, rank, size)
    check(check_native_ops, rank, size)
    check(check_gradient_errors)
    share = check(check_independent_allreduces_fuse, rank, size)
    if share is not None:
        print(f"rank {rank}: {share:.0%} of independent allreduces in one tf.function were fused", flush=True)
    check(check_join_and_barrier, rank, size)
    check(check_broadcast_variables, rank, size)
    check(check_tf1_session_hook, rank, size)
    check(check_distributed_gradient_tape, rank, size)
    check(check_tape_as_context_manager, rank, size)
    check(check_object_collectives, rank, size)
    check(check_errors, rank, size)
    hvd.barrier()  # a rank's shutdown stops every rank: finish the local checks first
    hvd.shutdown()
    check(check_not_initialized_after_shutdown)


def check_not_initialized_after_shutdown():
    expect_error(hvd.NotInitializedError, ["init"], hvd.allreduce, tf.ones([1]))
    # autograph=False: autograph re-raises exceptions with custom constructors as StagingError.
    expect_error(hvd.NotInitializedError, ["init"], tf.function(lambda: hvd.allreduce(tf.ones([1])), autograph=False))


if __name__ == "__main__":
    run_main(main)
