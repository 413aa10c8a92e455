"""Allgather, broadcast, alltoall and reducescatter for every dtype, plus barrier,
the object collectives and the topology queries; exact results."""

import os
import socket

import numpy as np
from checks import check
from rank_checks import (
    ALL_DTYPES,
    BOOL,
    NUMERIC_DTYPES,
    assert_equal,
    average_values,
    expected_reduction,
    rank_values,
    run_main,
)

import lockstep
import lockstep.numpy as hvd


def encoded_rows(dtype, sender, rows, row_shape=(3,)):
    """Rows whose values say who sent them and which row they were: exact in every dtype."""
    values = sender * 10 + np.arange(rows).reshape((rows,) + (1,) * len(row_shape))
    values = np.broadcast_to(values, (rows,) + row_shape)
    if dtype == BOOL:
        return np.ascontiguousarray(values % 2 == 1)
    return np.ascontiguousarray(values).astype(dtype)


def check_layout(rank, size):
    """local and cross rank/size against the hostnames every rank reports (one host, or
    a pretend cluster whose expected layout LOCKSTEP_TEST_HOSTS lists rank by rank)."""
    hosts = hvd.allgather_object(socket.gethostname())
    if os.environ.get("LOCKSTEP_TEST_HOSTS"):
        assert hosts == os.environ["LOCKSTEP_TEST_HOSTS"].split(","), f"ranks' hosts: {hosts}"
    same_host = [r for r in range(size) if hosts[r] == hosts[rank]]
    assert hvd.local_rank() == same_host.index(rank), f"local_rank() on {hosts[rank]}"
    assert hvd.local_size() == len(same_host), f"local_size() on {hosts[rank]}"
    local_ranks = [[r for r in range(size) if hosts[r] == hosts[q]].index(q) for q in range(size)]
    peers = [r for r in range(size) if local_ranks[r] == local_ranks[rank]]  # one per host
    assert hvd.cross_rank() == peers.index(rank), f"cross_rank() on {hosts[rank]}"
    assert hvd.cross_size() == len(peers), f"cross_size() on {hosts[rank]}"


def check_topology(rank, size):
    assert rank == int(os.environ["OMPI_COMM_WORLD_RANK"]), "rank() matches MPI"
    assert size == int(os.environ["OMPI_COMM_WORLD_SIZE"]), "size() matches MPI"
    assert hvd.local_rank() == int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]), "local_rank()"
    assert hvd.local_size() == int(os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"]), "local_size()"
    check_layout(rank, size)
    assert hvd.is_initialized() and lockstep.is_initialized(), "is_initialized() after init()"
    assert isinstance(hvd.mpi_threads_supported(), bool), "mpi_threads_supported() is a bool"
    assert hvd.nccl_built() == hvd.nccl_info()["built_version"], "nccl_built() is the NCCL built against"


def check_allgather(rank, size):
    for dtype in ALL_DTYPES:
        for row_shape, rows_of in [((3,), lambda r: r + 1), ((), lambda r: 2 * r), ((2, 2), lambda r: size - r)]:
            parts = [encoded_rows(dtype, r, rows_of(r), row_shape) for r in range(size)]
            mine = parts[rank].copy()
            result = hvd.allgather(parts[rank], name=f"allgather.{dtype.name}.{row_shape}")
            assert_equal(result, np.concatenate(parts), f"allgather {dtype.name} rows {row_shape}")
            assert_equal(parts[rank], mine, "allgather leaves its input untouched")
    handles = [hvd.allgather_async(np.full((rank + 1, 2), rank + i, np.int64)) for i in range(3)]
    for i, handle in enumerate(handles):
        expected = np.concatenate([np.full((r + 1, 2), r + i, np.int64) for r in range(size)])
        assert_equal(hvd.synchronize(handle), expected, f"unnamed async allgather {i}")


def check_broadcast(rank, size):
    for root in range(size):
        for dtype in ALL_DTYPES:
            for shape in [(5, 2), (), (0,)]:
                sent = rank_values(dtype, shape, rank)
                result = hvd.broadcast(sent, root_rank=root, name=f"broadcast.{dtype.name}.{shape}.{root}")
                assert_equal(result, rank_values(dtype, shape, root), f"broadcast {dtype.name} {shape} from {root}")
                assert_equal(sent, rank_values(dtype, shape, rank), "broadcast leaves its input untouched")
        handle = hvd.broadcast_async(np.full(3, rank, np.float32), root)
        assert_equal(hvd.synchronize(handle), np.full(3, root, np.float32), f"async broadcast from {root}")


def check_alltoall_even(rank, size):
    for dtype in ALL_DTYPES:
        sent = encoded_rows(dtype, rank, 2 * size)
        result = hvd.alltoall(sent, name=f"alltoall.even.{dtype.name}")
        expected = np.concatenate([encoded_rows(dtype, s, 2 * size)[2 * rank : 2 * rank + 2] for s in range(size)])
        assert_equal(result, expected, f"alltoall without splits {dtype.name}")
        assert not isinstance(result, tuple), "alltoall without splits returns only the array"


def uneven_splits(sender, size):
    return [(sender + dest) % 3 for dest in range(size)]


def check_alltoall_splits(rank, size):
    for dtype in ALL_DTYPES:
        for row_shape in [(3,), (), (2, 2)]:
            splits = uneven_splits(rank, size)
            sent = encoded_rows(dtype, rank, sum(splits), row_shape)
            result, received = hvd.alltoall(sent, splits=splits, name=f"alltoall.splits.{dtype.name}.{row_shape}")
            pieces = []
            for sender in range(size):
                sender_splits = uneven_splits(sender, size)
                start = sum(sender_splits[:rank])
                rows = encoded_rows(dtype, sender, sum(sender_splits), row_shape)
                pieces.append(rows[start : start + sender_splits[rank]])
            what = f"alltoall with splits {dtype.name} {row_shape}"
            assert_equal(result, np.concatenate(pieces), what)
            expected_splits = np.array([uneven_splits(s, size)[rank] for s in range(size)], np.int32)
            assert_equal(received, expected_splits, f"{what}: received splits")
    as_array = np.array(uneven_splits(rank, size), dtype=np.int64)
    result, received = hvd.alltoall(np.arange(as_array.sum(), dtype=np.float32), splits=as_array)
    assert received.sum() == result.shape[0], "splits given as an int64 array"


def scatter_counts(rows, size):
    return [rows // size + (1 if i < rows % size else 0) for i in range(size)]


def check_reducescatter(rank, size):
    for dtype in ALL_DTYPES:
        op_names = ["Sum"] if dtype == BOOL else ["Sum", "Average"]
        for op_name in op_names:
            for rows in [2 * size + 1, 1, 3 * size]:
                make = average_values if op_name == "Average" else (lambda d, s, r, n: rank_values(d, s, r))
                inputs = [make(dtype, (rows, 3), r, size) for r in range(size)]
                op = hvd.Sum if op_name == "Sum" else hvd.Average
                what = f"reducescatter {dtype.name} {op_name} rows {rows}"
                result = hvd.reducescatter(inputs[rank], op=op, name=what)
                full = expected_reduction(inputs, dtype, op_name, size)
                counts = scatter_counts(rows, size)
                start = sum(counts[:rank])
                assert_equal(result, full[start : start + counts[rank]], what)
    for dtype in NUMERIC_DTYPES:
        inputs = [rank_values(dtype, (size + 2,), r) for r in range(size)]
        handle = hvd.reducescatter_async(inputs[rank], op=hvd.Sum, prescale_factor=2.0, postscale_factor=3.0)
        full = expected_reduction(inputs, dtype, "Sum", size, 2.0, 3.0)
        counts = scatter_counts(size + 2, size)
        start = sum(counts[:rank])
        assert_equal(hvd.synchronize(handle), full[start : start + counts[rank]], f"scaled reducescatter {dtype.name}")
    default = hvd.reducescatter(average_values(np.dtype(np.float32), (size,), rank, size))
    expected = expected_reduction(
        [average_values(np.dtype(np.float32), (size,), r, size) for r in range(size)],
        np.dtype(np.float32),
        "Average",
        size,
    )
    assert_equal(default, expected[rank : rank + 1], "reducescatter defaults to Average")


def check_barrier_and_objects(rank, size):
    for _ in range(3):
        hvd.barrier()
    for root in range(size):
        obj = {"from": rank, "payload": np.arange(rank + 3), "text": "x" * (100 * rank)}
        got = hvd.broadcast_object(obj, root_rank=root)
        assert got["from"] == root and got["text"] == "x" * (100 * root), f"broadcast_object from {root}"
        assert np.array_equal(got["payload"], np.arange(root + 3)), "broadcast_object payload"
    named = hvd.broadcast_object(["named", rank], root_rank=size - 1, name="named.object")
    assert named == ["named", size - 1], "named broadcast_object"
    gathered = hvd.allgather_object({"rank": rank, "blob": b"\x00" * (rank * 1000)})
    assert [g["rank"] for g in gathered] == list(range(size)), "allgather_object keeps rank order"
    assert [len(g["blob"]) for g in gathered] == [r * 1000 for r in range(size)], "allgather_object sizes"
    assert hvd.allgather_object(None, name="none.object") == [None] * size, "allgather_object of None"


def check_timeline(rank, size, path):
    hvd.start_timeline(path)
    hvd.allreduce(np.ones(4, np.float32), name="timeline.marker")
    hvd.stop_timeline()
    hvd.barrier()
    if rank == 0:
        with open(path) as timeline:
            assert "timeline.marker" in timeline.read(), "the timeline records the op by name"


def main():
    hvd.init()
    hvd.init()  # idempotent
    rank, size = hvd.rank(), hvd.size()
    check(check_topology, rank, size)
    check(check_allgather, rank, size)
    check(check_broadcast, rank, size)
    check(check_alltoall_even, rank, size)
    check(check_alltoall_splits, rank, size)
    check(check_reducescatter, rank, size)
    check(check_barrier_and_objects, rank, size)
    check(check_timeline, rank, size, os.path.join(os.environ["LOCKSTEP_TEST_TMP"], f"timeline.{rank}.json"))
    hvd.shutdown()
    assert not hvd.is_initialized(), "is_initialized() after shutdown()"


if __name__ == "__main__":
    run_main(main)
