"""lockstep.tensorflow in one process without init(): every entry point refuses
clearly instead of hanging or failing obscurely."""

import pytest

tf = pytest.importorskip("tensorflow")
hvd = pytest.importorskip("lockstep.tensorflow")


@pytest.mark.parametrize(
    "call",
    [
        lambda: hvd.allreduce(tf.ones([2])),
        lambda: hvd.grouped_allreduce([tf.ones([2])]),
        lambda: hvd.allgather(tf.ones([2, 1])),
        lambda: hvd.broadcast(tf.ones([2]), 0),
        lambda: hvd.alltoall(tf.ones([2])),
        lambda: hvd.reducescatter(tf.ones([2])),
        lambda: hvd.barrier(),
        lambda: hvd.join(),
        lambda: tf.function(lambda: hvd.allreduce(tf.ones([2])))(),
    ],
    ids=[
        "allreduce",
        "grouped_allreduce",
        "allgather",
        "broadcast",
        "alltoall",
        "reducescatter",
        "barrier",
        "join",
        "allreduce in tf.function",
    ],
)
def test_collectives_before_init_say_to_call_init(call):
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="init"):
        call()


def test_graph_ops_before_init_fail_when_they_run():
    with pytest.raises(tf.errors.FailedPreconditionError, match="init"):
        hvd.rank_op()


def test_the_op_library_is_loaded_and_registers_every_op():
    from lockstep.tensorflow.op_library import OPS

    for op in (
        "lockstep_allreduce",
        "lockstep_grouped_allreduce",
        "lockstep_allgather",
        "lockstep_broadcast",
        "lockstep_alltoall",
        "lockstep_reducescatter",
        "lockstep_grouped_reducescatter",
        "lockstep_join",
        "lockstep_barrier",
        "lockstep_rank",
        "lockstep_process_set_included",
    ):
        assert hasattr(OPS, op), op
