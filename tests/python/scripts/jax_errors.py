"""lockstep.jax errors and robustness under mpirun: mismatched shapes inside jit
fail on every rank with a clear error (no hang) and later collectives still work;
wrong arguments are refused at trace time; back-to-back asynchronous dispatches of
one jitted function with many independent collectives complete in order; a
collective whose result is unused still runs once per execution."""

import os
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
from checks import check
from rank_checks import assert_equal, expect_error, run_main
from timeline_checks import ALLREDUCE_RUNS, read_timeline

import lockstep.jax as hvd
from lockstep.common.ops import BOOL_AVERAGE_ERROR, BOOL_SCALE_ERROR


def check_mismatched_shapes_fail_everywhere(rank, size):
    bad = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum))
    x = jnp.ones(3 + rank, jnp.float32)  # a different shape on every rank
    error = expect_error(Exception, ["shape"], lambda: jax.block_until_ready(bad(x)))
    print(f"rank {rank}: mismatch inside jit raised {type(error).__name__}: {str(error).splitlines()[0]}", flush=True)
    uneven = jax.jit(lambda x: hvd.allgather(x))  # traced for equal first dimensions
    if size == 2:  # every rank's traced size (2 * rows) differs from the 1 + 2 rows gathered
        expect_error(Exception, ["sizes="], lambda: jax.block_until_ready(uneven(jnp.ones((1 + rank, 2)))))
    good = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum))(jnp.ones(4, jnp.float32))
    assert_equal(np.asarray(good), np.full(4, size, np.float32), "a collective after the failed ones")


def check_trace_time_errors(rank, size):
    x = jnp.ones((2 * size, 2), jnp.float32)
    expect_error(ValueError, ["received_splits"], jax.jit(lambda x: hvd.alltoall(x, splits=[2] * size)), x)
    expect_error(
        ValueError,
        ["reduce op Max is not supported", "reducescatter takes Average"],
        jax.jit(lambda x: hvd.reducescatter(x, op=hvd.Max)),
        x,
    )
    expect_error(ValueError, ["divisible"], jax.jit(lambda x: hvd.alltoall(x)), jnp.ones((2 * size + 1, 2)))
    expect_error(ValueError, ["splits", "sum to"], jax.jit(lambda x: hvd.alltoall(x, splits=[1] * size)), x)
    expect_error(ValueError, ["sizes"], jax.jit(lambda x: hvd.allgather(x, sizes=[5] * size)), x)
    expect_error(ValueError, ["root_rank"], jax.jit(lambda x: hvd.broadcast(x, size)), x)
    for eager_only in ("barrier", "join"):
        expect_error(
            RuntimeError,
            [f"{eager_only}() works eagerly only"],
            jax.jit(lambda x, f=getattr(hvd, eager_only): (f(), x)[1]),
            x,
        )
    expect_error(RuntimeError, ["eagerly only"], jax.jit(lambda x: (hvd.broadcast_object(1), x)[1]), x)


def check_core_refuses_bool_reductions_with_the_python_text(rank, size):
    """Inside jit a bool reduction is refused by the core's own checks, made while
    tracing (lockstep.common.validation.check_op), with the core's text."""
    flags = jnp.array([rank % 2 == 0, True])
    average = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Average, name="bool.average"))
    expect_error(Exception, [BOOL_AVERAGE_ERROR], lambda: jax.block_until_ready(average(flags)))
    scaled = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, name="bool.scaled"))
    expect_error(Exception, [BOOL_SCALE_ERROR], lambda: jax.block_until_ready(scaled(flags)))


def check_back_to_back_dispatch(rank, size):
    @jax.jit
    def many(xs):
        sums = [hvd.allreduce(x, op=hvd.Sum) for x in xs]
        gathered = hvd.allgather(xs[0])
        return sums, gathered, hvd.broadcast(xs[1], size - 1)

    runs = [many([jnp.full(5, rank + i + k, jnp.float32) for i in range(12)]) for k in range(6)]  # no waiting
    for k, (sums, gathered, broadcast) in enumerate(runs):
        for i, s in enumerate(sums):
            assert_equal(np.asarray(s), np.full(5, sum(r + i + k for r in range(size)), np.float32), f"run {k} sum {i}")
        assert_equal(
            np.asarray(gathered),
            np.concatenate([np.full(5, r + k, np.float32) for r in range(size)]),
            f"run {k} allgather",
        )
        assert_equal(np.asarray(broadcast), np.full(5, size - 1 + 1 + k, np.float32), f"run {k} broadcast")


def check_each_execution_runs_a_collective_once(rank, size):
    """XLA may not run a collective twice per execution, nor skip one whose result is
    used: the timeline (rank 0) shows exactly one allreduce per execution. (One whose
    result is unused is pure to XLA, which may drop it on every rank alike:
    jax_collectives.py checks that nothing hangs then.)"""
    step = jax.jit(lambda x: hvd.allreduce(x, name="used_result") + 1)
    jax.block_until_ready(step(jnp.ones(3)))
    path = os.path.join(tempfile.gettempdir(), f"lockstep_jax_once_{os.getpid()}.json")
    hvd.start_timeline(path)
    for _ in range(4):
        jax.block_until_ready(step(jnp.ones(3)))
    hvd.stop_timeline()
    if rank != 0:
        return
    events = read_timeline(path)
    os.remove(path)
    tracks = {e["tid"] for e in events if e.get("name") == "thread_name" and e["args"]["name"] == "used_result"}
    runs = [e for e in events if e.get("tid") in tracks and e.get("ph") == "B" and e["name"] in ALLREDUCE_RUNS]
    assert len(runs) == 4, f"an allreduce ran {len(runs)} times in 4 executions"


def check_use_before_init_fails():
    try:
        jax.jit(lambda x: hvd.allreduce(x))(jnp.ones(2))
    except Exception as error:  # noqa: BLE001 (checked below)
        assert "init" in str(error).lower(), f"use before init: {error}"
    else:
        raise AssertionError("an allreduce before init() must fail")


def check_errors(rank, size):
    """Every check after init(); the mismatched shapes last, since they leave failed
    collectives behind. jax_training.py runs them in its launch, after its own."""
    check(check_trace_time_errors, rank, size)
    check(check_core_refuses_bool_reductions_with_the_python_text, rank, size)
    check(check_back_to_back_dispatch, rank, size)
    check(check_each_execution_runs_a_collective_once, rank, size)
    check(check_mismatched_shapes_fail_everywhere, rank, size)


def main():
    check(check_use_before_init_fails)
    hvd.init()
    check_errors(hvd.rank(), hvd.size())
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
