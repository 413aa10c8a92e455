"""Process sets under mpirun at 3 and 4 ranks (the disjoint even/odd sets need 4 to
both have two members; at 3 the odd set is a single rank)."""

import pytest
from mpi_harness import run_ranks

RANK_COUNTS = pytest.mark.parametrize("ranks", [3, 4], ids=lambda n: f"np{n}")


@RANK_COUNTS
def test_numpy_collectives_on_sets_dynamic_changes_and_errors(ranks, built_extension):
    run_ranks("process_sets.py", ranks).assert_all_ranks_passed(ranks)


@RANK_COUNTS
def test_torch_optimizer_and_collectives_on_a_set(ranks, built_extension):
    run_ranks("process_sets_torch.py", ranks).assert_all_ranks_passed(ranks)


def test_tensorflow_ops_on_a_set(built_extension):
    """4 ranks: two disjoint sets of two (TensorFlow's start-up makes more runs costly)."""
    run_ranks("process_sets_tf.py", 4, timeout=240).assert_all_ranks_passed(4)
