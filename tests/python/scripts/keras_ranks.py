"""Rank script for lockstep.keras under the backend named by KERAS_BACKEND
(tensorflow, torch or jax): every check in one launch, since imports dominate.

argv[1]: a directory shared by the ranks, for the checkpoint; argv[2], if given: one
for keras_parity.py's saved models, whose checks then run in this launch too (before
the mismatched-shapes check, which leaves a failed step behind).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def limit_threads():
    # Two ranks share two cores here; more threads per rank only thrash.
    if os.environ.get("KERAS_BACKEND") == "torch":
        import torch

        torch.set_num_threads(1)
    elif os.environ.get("KERAS_BACKEND") == "jax":
        pass  # XLA:CPU sizes its own thread pool; nothing to limit up front
    else:
        import tensorflow as tf

        tf.config.threading.set_inter_op_parallelism_threads(2)
        tf.config.threading.set_intra_op_parallelism_threads(1)


limit_threads()

import keras  # noqa: E402
from checks import check  # noqa: E402
from keras_callback_checks import (  # noqa: E402
    check_broadcast_overwrites_other_ranks,
    check_learning_rate_schedule,
    check_learning_rate_warmup,
    check_metric_average,
)
from keras_training_checks import (  # noqa: E402
    check_checkpoint_on_rank_zero_and_resume,
    check_mismatched_shapes_fail_fit,
    check_optimizers_match_one_process,
    check_wrapper_properties,
)
from rank_checks import run_main  # noqa: E402

import lockstep.keras as hvd  # noqa: E402


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    assert keras.backend.backend() == os.environ["KERAS_BACKEND"], keras.backend.backend()
    check(check_wrapper_properties)
    check(check_optimizers_match_one_process, rank, size)
    check(check_broadcast_overwrites_other_ranks, rank, size)
    check(check_metric_average, rank, size)
    check(check_learning_rate_warmup, rank, size)
    check(check_learning_rate_schedule, rank, size)
    check(check_checkpoint_on_rank_zero_and_resume, rank, size, sys.argv[1])
    if len(sys.argv) > 2:
        from keras_parity import run_parity_checks

        run_parity_checks(rank, size, sys.argv[2])
    message = check(check_mismatched_shapes_fail_fit, rank, size)
    if message:
        print(f"rank {rank}: fit failed as expected: {message[:1500]}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
