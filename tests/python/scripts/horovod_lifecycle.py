"""A Horovod script (only the import changed) that keeps asking the topology after
`hvd.elastic.run` returned and after a peer's orderly shutdown, as Horovod 0.28.1
allows: rank/size/local_rank/... and the build queries answer on every rank, a
collective then fails with HorovodInternalError naming the cause, and after this
rank's own shutdown() the queries raise ValueError.

Rank 0 finishes first and calls hvd.shutdown(), as a script's end does; the others
keep going after it. Each stage is a named check (scripts/checks.py)."""

import time

import torch
from checks import check
from rank_checks import expect_error, run_main, world_rank, world_size

import lockstep.torch as hvd  # was: import horovod.torch as hvd


def topology():
    return (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size())


def build_queries():
    return (
        hvd.mpi_built(),
        hvd.mpi_enabled(),
        hvd.mpi_threads_supported(),
        hvd.nccl_built(),
        hvd.gloo_built(),
        hvd.gloo_enabled(),
        hvd.cuda_built(),
        hvd.rocm_built(),
        hvd.ddl_built(),
        hvd.ccl_built(),
    )


def main():
    hvd.init()
    rank, size = world_rank(), world_size()
    before = topology()
    builds = build_queries()
    check(check_queries_after_elastic_run, rank, size, before)
    check(check_queries_and_collectives_after_a_peers_shutdown, rank, before, builds)
    check(check_queries_after_this_ranks_shutdown)


def check_queries_after_elastic_run(rank, size, before):
    assert before[:2] == (rank, size), f"topology {before}"
    state = hvd.elastic.TorchState(epoch=0, entries=0)

    @hvd.elastic.run
    def train(state):
        state.entries += 1
        while state.epoch < 3:
            total = hvd.allreduce(torch.ones(2) * rank, op=hvd.Sum, name="lifecycle.grad")
            assert total.tolist() == [float(sum(range(size)))] * 2, f"allreduce: {total}"
            state.epoch += 1
            state.commit()
        return state.epoch

    assert train(state) == 3 and state.entries == 1, "elastic.run returned the function's result"
    assert topology() == before, "the topology answers after elastic.run returned"


def check_queries_and_collectives_after_a_peers_shutdown(rank, before, builds):
    if rank == 0:
        hvd.shutdown()  # the end of rank 0's script
    else:
        # Wait until rank 0's shutdown has reached this rank's engine.
        deadline = time.monotonic() + 60
        while hvd.is_initialized() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not hvd.is_initialized(), "rank 0's shutdown stopped lockstep here"
        for _ in range(3):
            assert topology() == before, f"after a peer's shutdown: {topology()} != {before}"
            assert build_queries() == builds, "the build queries answer after a peer's shutdown"
        error = expect_error(hvd.HorovodInternalError, ["shut down"], hvd.allreduce, torch.ones(2), name="late")
        assert not isinstance(error, ValueError), f"a collective after a peer's shutdown: {type(error)}"
        expect_error(hvd.HorovodInternalError, ["shut down"], hvd.broadcast_object, "x", 0)
        hvd.shutdown()


def check_queries_after_this_ranks_shutdown():
    # ValueError, as Horovod's "not initialized".
    for query in (hvd.rank, hvd.size, hvd.local_rank, hvd.local_size, hvd.cross_rank, hvd.cross_size):
        expect_error(ValueError, ["shut down"], query)
    expect_error(ValueError, ["shut down"], hvd.mpi_threads_supported)
    assert hvd.mpi_built() and hvd.gloo_built() is False, "build queries need no init"


if __name__ == "__main__":
    run_main(main)
