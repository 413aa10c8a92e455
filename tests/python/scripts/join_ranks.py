"""join(): ranks with less work join early and contribute zeros to the others'
allreduces; Average still divides by the full size; join returns the last rank
to join; only allreduce may proceed while ranks are joined; afterwards ordinary
(including unnamed) collectives work again."""

import numpy as np
from rank_checks import assert_equal, expect_error, run_main

import lockstep.numpy as hvd


def run_uneven_round(rank, size, steps_of, label):
    """Rank r runs steps_of(r) steps, then joins. Returns join()'s answer."""
    for step in range(steps_of(rank)):
        contributors = [r for r in range(size) if steps_of(r) > step]
        value = size * (rank + 1)
        summed = hvd.allreduce(np.full(4, value, np.float32), op=hvd.Sum, name=f"{label}.sum.{step}")
        expected_sum = sum(size * (r + 1) for r in contributors)
        assert_equal(summed, np.full(4, expected_sum, np.float32), f"{label} step {step}: Sum with joined ranks")
        averaged = hvd.allreduce(np.full((2, 3), value, np.int32), op=hvd.Average)  # unnamed on purpose
        expected_average = sum(r + 1 for r in contributors)  # the sum over contributors / full size
        assert_equal(
            averaged,
            np.full((2, 3), expected_average, np.int32),
            f"{label} step {step}: Average divides by the full size",
        )
        scaled = hvd.allreduce(
            np.full(3, 1.0, np.float64), op=hvd.Sum, prescale_factor=2.0, name=f"{label}.scaled.{step}"
        )
        assert_equal(scaled, np.full(3, 2.0 * len(contributors), np.float64), f"{label} step {step}: prescale")
    return hvd.join()


def check_everyone_after_join(rank, size, label):
    """Unnamed ops line up again after a join even though ranks ran different counts."""
    result = hvd.allreduce(np.full(5, rank, np.int64), op=hvd.Sum)
    assert_equal(result, np.full(5, sum(range(size)), np.int64), f"unnamed allreduce after {label}")
    gathered = hvd.allgather(np.full((1, 2), rank, np.int16))
    assert_equal(
        gathered, np.repeat(np.arange(size, dtype=np.int16), 2).reshape(size, 2), f"unnamed allgather after {label}"
    )


def check_only_allreduce_while_joined(rank, size):
    if rank == size - 1:
        error = expect_error(
            hvd.LockstepError,
            ["joined", "while.joined"],
            hvd.allgather,
            np.ones((2, 2), np.float32),
            name="while.joined",
        )
        for other in range(size - 1):
            assert str(other) in str(error), f"the error names joined rank {other}: {error}"
        error = expect_error(
            hvd.LockstepError, ["joined"], hvd.allreduce, np.ones(2, np.float32), op=hvd.Max, name="max.while.joined"
        )
    return hvd.join()


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    last = run_uneven_round(rank, size, lambda r: r + 1, "more.work.on.higher.ranks")
    assert last == size - 1, f"join returned {last}; rank {size - 1} must join last"
    check_everyone_after_join(rank, size, "round 1")

    last = run_uneven_round(rank, size, lambda r: size - r, "more.work.on.lower.ranks")
    assert last == 0, f"join returned {last}; rank 0 must join last"
    check_everyone_after_join(rank, size, "round 2")

    last = check_only_allreduce_while_joined(rank, size)
    assert last == size - 1, f"join returned {last}; rank {size - 1} must join last"
    check_everyone_after_join(rank, size, "round 3")

    last = hvd.join()  # everyone joins at once: any rank may be last, but all agree
    assert 0 <= last < size, f"join returned {last}"
    agreed = hvd.allgather(np.array([last], np.int32))
    assert np.all(agreed == last), f"ranks disagree on the last rank to join: {agreed}"
    hvd.barrier()
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
