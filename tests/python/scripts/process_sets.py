"""Process sets with the numpy frontend: static sets at init, two disjoint sets
running every collective interleaved (exact values), the same name in flight in two
sets, a set overlapping the global one between global ops, dynamic add/remove, and
the errors: ops from outside a set, mismatches inside one, unknown and removed sets,
disagreeing add calls. Run at 3 and 4 ranks (the odd set has one rank at 3)."""

import os

import numpy as np
from checks import check
from rank_checks import assert_equal, run_main

import lockstep.numpy as hvd


def expect_error(kind, fragment, action):
    try:
        action()
    except kind as error:
        assert fragment in str(error), f"expected {fragment!r} in: {error}"
        return error
    raise AssertionError(f"expected {kind.__name__} containing {fragment!r}")


def check_every_collective(me, process_set, tag):
    """Each op's values say which global rank sent them, so results are exact."""
    ranks, n = process_set.ranks, len(process_set.ranks)
    mine = process_set.rank()
    kw = {"process_set": process_set}
    assert_equal(
        hvd.allreduce(np.full(3, me, np.int64), op=hvd.Sum, name=f"{tag}.sum", **kw),
        np.full(3, sum(ranks), np.int64),
        "allreduce Sum over the set",
    )
    assert_equal(
        hvd.allreduce(np.full(2, float(me)), name=f"{tag}.avg", **kw),
        np.full(2, sum(ranks) / n),
        "allreduce Average divides by the set's size",
    )
    assert_equal(
        hvd.allreduce(np.array([me], np.int32), op=hvd.Max, **kw),
        np.array([max(ranks)], np.int32),
        "unnamed allreduce Max",
    )
    in_place = np.full(4, float(me))
    hvd.allreduce_(in_place, op=hvd.Sum, **kw)
    assert_equal(in_place, np.full(4, float(sum(ranks))), "allreduce_ in place")
    grouped = hvd.grouped_allreduce(
        [np.full(2, me, np.int32), np.full(5, 2.0 * me)], op=hvd.Sum, name=f"{tag}.grouped", **kw
    )
    assert_equal(grouped[0], np.full(2, sum(ranks), np.int32), "grouped_allreduce [0]")
    assert_equal(grouped[1], np.full(5, 2.0 * sum(ranks)), "grouped_allreduce [1]")
    rows = [np.full((r + 1, 2), r, np.int16) for r in ranks]
    assert_equal(
        hvd.allgather(rows[mine], name=f"{tag}.gather", **kw),
        np.concatenate(rows),
        "allgather of uneven rows, in set order",
    )
    gathered = hvd.grouped_allgather([rows[mine], np.array([me], np.float32)], **kw)
    assert_equal(gathered[1], np.array(ranks, np.float32), "grouped_allgather")
    root = ranks[-1]
    assert_equal(
        hvd.broadcast(np.full(3, me, np.float32), root_rank=root, **kw),
        np.full(3, root, np.float32),
        "broadcast from a global root rank",
    )
    sent = np.array([[100 * me + dest] for dest in ranks], np.int64)
    assert_equal(
        hvd.alltoall(sent, **kw),
        np.array([[100 * src + me] for src in ranks], np.int64),
        "alltoall: one row to each member",
    )
    scattered = hvd.reducescatter(np.arange(2 * n, dtype=np.float64) * (me + 1), op=hvd.Sum, **kw)
    total = sum(r + 1 for r in ranks)
    assert_equal(scattered, np.arange(2 * mine, 2 * mine + 2, dtype=np.float64) * total, "reducescatter Sum")
    shares = hvd.grouped_reducescatter([np.full((n, 1), me, np.int32)], op=hvd.Sum, **kw)
    assert_equal(shares[0], np.full((1, 1), sum(ranks), np.int32), "grouped_reducescatter")
    hvd.barrier(**kw)
    assert hvd.broadcast_object({"from": me}, root_rank=root, **kw) == {"from": root}, "broadcast_object"
    assert hvd.allgather_object(("rank", me), **kw) == [("rank", r) for r in ranks], "allgather_object"


def check_same_name_in_two_sets(me, my_set):
    """Names are negotiated per set: one name in flight in my set and in the global set."""
    in_set = hvd.allreduce_async(np.full(2, me, np.int64), op=hvd.Sum, name="shared", process_set=my_set)
    in_world = hvd.allreduce_async(np.full(2, me, np.int64), op=hvd.Sum, name="shared")
    assert_equal(hvd.synchronize(in_world), np.full(2, sum(range(hvd.size())), np.int64), "global 'shared'")
    assert_equal(hvd.synchronize(in_set), np.full(2, sum(my_set.ranks), np.int64), "set 'shared'")


def check_overlapping_set(me, size, my_set):
    """A set that overlaps both static sets, used between global ops; added while an
    op on another set is in flight."""
    in_flight = hvd.allreduce_async(np.array([me]), op=hvd.Sum, name="during.add", process_set=my_set)
    low = hvd.add_process_set([0, 1])
    assert_equal(hvd.synchronize(in_flight), np.array([sum(my_set.ranks)]), "op in flight during add_process_set")
    assert low.process_set_id == 3 and low.size() == 2, low
    for step in range(3):
        assert_equal(
            hvd.allreduce(np.array([me + step]), op=hvd.Sum),
            np.array([sum(range(size)) + size * step]),
            "global op between set ops",
        )
        if low.included():
            assert_equal(
                hvd.allreduce(np.array([me * 10 + step]), op=hvd.Sum, process_set=low),
                np.array([10 + 2 * step]),
                "op on the overlapping set",
            )
    assert hvd.remove_process_set(low) is True
    assert low.process_set_id is None
    return low


def check_dynamic_sets(me, size, removed):
    last = hvd.add_process_set(hvd.ProcessSet([size - 1, size - 2]))
    assert last.ranks == [size - 2, size - 1] and last.process_set_id == 4, "ids are never reused"
    if last.included():
        assert_equal(hvd.allreduce(np.array([1.0]), op=hvd.Sum, process_set=last), np.array([2.0]), "new set")
    expect_error(ValueError, "not registered", lambda: hvd.allreduce(np.array([1.0]), process_set=removed))
    expect_error(ValueError, "not registered", lambda: hvd.allreduce(np.array([1.0]), process_set=hvd.ProcessSet([0])))
    expect_error(ValueError, "already exists", lambda: hvd.add_process_set([size - 2, size - 1]))
    expect_error(ValueError, "cannot be removed", lambda: hvd.remove_process_set(hvd.global_process_set))
    # Ranks that disagree about a change fail it everywhere, with both calls named.
    proposal = [0, 1] if me == 0 else [0, size - 1]
    error = expect_error(
        hvd.LockstepError, "rank 0 called add_process_set([0, 1])", lambda: hvd.add_process_set(proposal)
    )
    assert f"add_process_set([0, {size - 1}])" in str(error), str(error)
    stale = hvd.ProcessSet([0])
    stale.process_set_id = last.process_set_id  # soon an id the core no longer knows
    # An op pending on a set when it is removed fails (its partner never submitted it).
    orphan = None
    if me == last.ranks[0]:
        orphan = hvd.allreduce_async(np.ones(2), name="orphan", process_set=last)
    hvd.remove_process_set(last)
    if orphan is not None:
        expect_error(ValueError, "was removed while 'orphan' was pending", lambda: hvd.synchronize(orphan))
    expect_error(ValueError, "does not exist", lambda: hvd.allreduce(np.array([1.0]), process_set=stale))
    again = hvd.add_process_set([0])  # the ids stay in step after a failed change
    assert again.process_set_id == 5, again


def check_errors(me, even, odd):
    other = odd if me % 2 == 0 else even
    # Outside a set: a clear error at once, on this rank only; nobody else waits.
    expect_error(ValueError, f"rank {me} is not in it", lambda: hvd.allreduce(np.ones(2), process_set=other))
    if even.included():
        expect_error(ValueError, "is not in the set", lambda: hvd.broadcast(np.ones(2), root_rank=1, process_set=even))
        # A mismatch inside the set fails on the set's ranks only.
        shape = (2,) if even.rank() == 0 else (3,)
        error = expect_error(
            hvd.PreconditionError,
            "Mismatched shapes",
            lambda: hvd.allreduce(np.ones(shape), name="bad.shape", process_set=even),
        )
        assert f"process set 1, whose ranks 0, 1, ... are global ranks {even.ranks}" in str(error), str(error)
    hvd.barrier()  # every rank is still in step on the global set


def main():
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    even = hvd.ProcessSet([r for r in range(size) if r % 2 == 0])
    odd = hvd.ProcessSet([r for r in range(size) if r % 2 == 1])
    hvd.init(process_sets=[even, odd])
    me = hvd.rank()
    my_set = even if me % 2 == 0 else odd
    check(check_static_sets, me, size, even, odd, my_set)
    for round_index in range(2):  # interleaved with global ops, twice (cached the second time)
        check("collectives_on_a_set", check_every_collective, me, my_set, f"set.{round_index}")
        check(check_global_op, me, size)
        check(
            "collectives_on_the_global_set", check_every_collective, me, hvd.global_process_set, f"global.{round_index}"
        )
    check(check_same_name_in_two_sets, me, my_set)
    removed = check(check_overlapping_set, me, size, my_set)
    check(check_dynamic_sets, me, size, removed)
    check(check_errors, me, even, odd)
    check(check_restart, me, even, odd)


def check_static_sets(me, size, even, odd, my_set):
    assert (even.process_set_id, odd.process_set_id) == (1, 2), (even, odd)
    assert hvd.global_process_set.ranks == list(range(size)) and hvd.global_process_set.size() == size
    assert my_set.included() and my_set.rank() == my_set.ranks.index(me)
    assert (odd if my_set is even else even).rank() == -1


def check_global_op(me, size):
    assert_equal(hvd.allreduce(np.array([me]), op=hvd.Sum), np.array([sum(range(size))]), "global op")


def check_restart(me, even, odd):
    """init() again while running keeps the sets; after shutdown() the core starts
    with none, so the old ids are cleared and static sets are numbered afresh."""
    hvd.init(process_sets=[even, odd])
    assert (even.process_set_id, odd.process_set_id) == (1, 2), (even, odd)
    hvd.shutdown()
    hvd.init(process_sets=[odd])
    assert odd.process_set_id == 1 and even.process_set_id is None, (even, odd)
    if odd.included():
        assert_equal(
            hvd.allreduce(np.array([me]), op=hvd.Sum, process_set=odd),
            np.array([sum(odd.ranks)]),
            "a set registered after a restart",
        )
    hvd.barrier()


if __name__ == "__main__":
    run_main(main)
