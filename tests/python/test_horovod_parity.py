"""Horovod 0.28.1 behaviour that ported scripts rely on, each checked by a script
written for Horovod with only the import changed, under mpirun at 2 and 3 ranks."""

from mpi_harness import run_ranks


def test_queries_answer_after_elastic_run_and_a_peer_shutdown(num_ranks):
    run = run_ranks("horovod_lifecycle.py", num_ranks, timeout=180)
    run.assert_all_ranks_passed(num_ranks)
