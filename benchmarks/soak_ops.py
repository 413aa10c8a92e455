"""The soak test's collectives: drawn from a random sequence every rank shares, with
inputs chosen so that every expected result is computable exactly.

Each op is a plain dict (its "spec") drawn from the shared generator; a rank's input
is a pure function of the spec and the rank, so every rank can compute every other
rank's input and hence the exact expected result, with the same arithmetic as the
core (Horovod's scaling: Average is a Sum scaled by 1/size in the dtype's precision,
float16/bfloat16 through float32, integers through float64 and truncated).
"""

import ml_dtypes
import numpy as np

import lockstep.numpy as hvd

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
HALF_FLOATS = (np.dtype(np.float16), BFLOAT16)
FLOATS = HALF_FLOATS + (np.dtype(np.float32), np.dtype(np.float64))
INTEGERS = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.int64))
BOOL = np.dtype(np.bool_)
NUMERIC = INTEGERS + FLOATS
REDUCE_OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max, "Product": hvd.Product}
BOOL_OPS = ("Sum", "Min", "Max")  # logical or, and, or
# Weights of each collective in the mix.
KINDS = {
    "allreduce": 8,
    "grouped_allreduce": 2,
    "allgather": 2,
    "broadcast": 2,
    "alltoall": 2,
    "reducescatter": 2,
    "barrier": 1,
}
KIND_NAMES = list(KINDS)
KIND_P = np.array(list(KINDS.values()), float) / sum(KINDS.values())
CACHED_NAMES = 64  # repeating names keep the response cache busy; fresh ones churn it


def draw_elements(rng):
    """Mostly small tensors (fused), sometimes large ones (chunked; shared memory)."""
    roll = rng.random()
    if roll < 0.02:
        return int(rng.integers(64 * 1024, 400 * 1024))
    if roll < 0.15:
        return int(rng.integers(1000, 20000))
    return int(rng.integers(0, 300))


def draw_name(rng, kind, serial):
    """A repeating name (cached), a fresh one (uncached) or None (automatic)."""
    roll = rng.random()
    if roll < 0.6:
        return f"soak.{kind}.{int(rng.integers(CACHED_NAMES))}"
    if roll < 0.9:
        return f"soak.fresh.{serial}"
    return None


def draw_spec(rng, size, serial):
    kind = KIND_NAMES[rng.choice(len(KIND_NAMES), p=KIND_P)]
    spec = {"kind": kind, "name": draw_name(rng, kind, serial), "seed": int(rng.integers(1 << 20))}
    if kind in ("allreduce", "grouped_allreduce"):
        spec["op"] = list(REDUCE_OPS)[rng.integers(len(REDUCE_OPS))]
        count = 1 if kind == "allreduce" else int(rng.integers(1, 6))
        spec["members"] = [(_reduction_dtype(rng, spec["op"]), draw_elements(rng)) for _ in range(count)]
    elif kind == "reducescatter":
        spec["op"] = ["Sum", "Average"][rng.integers(2)]
        spec["dtype"] = NUMERIC[rng.integers(len(NUMERIC))]
        spec["rows"] = int(rng.integers(1, 40)) if rng.random() < 0.9 else int(rng.integers(1000, 4000))
        spec["cols"] = int(rng.integers(1, 8))
    elif kind == "allgather":
        spec["dtype"] = _any_dtype(rng)
        spec["rows"] = [int(rng.integers(0, 20)) for _ in range(size)]  # uneven, some empty
        spec["cols"] = int(rng.integers(1, 6)) if rng.random() < 0.95 else 4096
    elif kind == "broadcast":
        spec["dtype"] = _any_dtype(rng)
        spec["elements"] = draw_elements(rng)
        spec["root"] = int(rng.integers(size))
    elif kind == "alltoall":
        spec["dtype"] = _any_dtype(rng)
        spec["splits"] = rng.integers(0, 6, size=(size, size)).tolist()  # [sender][receiver] rows
        spec["cols"] = int(rng.integers(1, 5))
    return spec


def _any_dtype(rng):
    dtypes = NUMERIC + (BOOL,)
    return dtypes[rng.integers(len(dtypes))]


def _reduction_dtype(rng, op):
    dtypes = NUMERIC + (BOOL,) if op in BOOL_OPS else NUMERIC
    return dtypes[rng.integers(len(dtypes))]


# Inputs: small integers, exact in every dtype; sums of up to 3 ranks stay exact even
# in bfloat16 (8 significant bits) and products stay tiny.


def values(dtype, count, rank, seed, op="Sum", size=1):
    index = np.arange(count, dtype=np.int64) + seed
    if dtype == BOOL:
        return (index * 7 + rank * 3) % 5 < 2 + rank % 2
    if op == "Product":
        v = np.where((index + rank) % 3 == 0, 2, 1)
        if dtype.kind in "if":
            v = np.where((index + 2 * rank) % 4 == 1, -v, v)
    else:
        v = (index * 5 + rank * 11) % 9  # 0..8
        if dtype.kind in "if":
            v = v - 4
    return v.astype(dtype)


def reduce_exact(inputs, dtype, op, size):
    """The core's result for op over the ranks' inputs."""
    stacked = np.stack(inputs)
    if dtype == BOOL:
        return stacked.all(axis=0) if op == "Min" else stacked.any(axis=0)
    if op == "Min":
        return stacked.min(axis=0)
    if op == "Max":
        return stacked.max(axis=0)
    if op == "Product":
        return stacked.prod(axis=0, dtype=dtype)
    total = stacked.astype(np.float64).sum(axis=0) if dtype in FLOATS else stacked.sum(axis=0, dtype=dtype)
    total = total.astype(dtype)
    if op == "Sum":
        return total
    return scale(total, 1.0 / size)


def scale(array, factor):
    """ScaleBuffer as the core does it (see docs/DESIGN.md, Horovod's numerics)."""
    dtype = array.dtype
    if dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        return (dtype.type(factor) * array).astype(dtype)
    if dtype in HALF_FLOATS:
        return (np.float32(factor) * array.astype(np.float32)).astype(dtype)
    return np.trunc(array.astype(np.float64) * factor).astype(dtype)


class Op:
    """One drawn collective on this rank: submit it, then check its result."""

    def __init__(self, spec, rank, size):
        self.spec, self.rank, self.size = spec, rank, size

    def submit(self, asynchronous):
        """Returns a handle (asynchronous) or the result."""
        kind = self.spec["kind"]
        call = getattr(self, "_" + kind)
        return call(asynchronous)

    def check(self, result):
        expected = getattr(self, "_expected_" + self.spec["kind"])()
        _compare(result, expected, self.describe())

    def describe(self):
        return f"{self.spec['kind']} '{self.spec['name']}' {self.spec}"

    def _input(self, rank, dtype, count, shape=None, op="Sum", salt=0):
        data = values(dtype, count, rank, self.spec["seed"] + salt, op, self.size)
        return data.reshape(shape if shape is not None else (count,))

    # allreduce and grouped allreduce

    def _members(self, rank):
        op = self.spec["op"]
        return [self._input(rank, dtype, n, op=op, salt=i) for i, (dtype, n) in enumerate(self.spec["members"])]

    def _allreduce(self, asynchronous):
        (data,) = self._members(self.rank)
        function = hvd.allreduce_async if asynchronous else hvd.allreduce
        return function(data, name=self.spec["name"], op=REDUCE_OPS[self.spec["op"]])

    def _expected_allreduce(self):
        return self._expected_grouped_allreduce()[0]

    def _grouped_allreduce(self, asynchronous):
        function = hvd.grouped_allreduce_async if asynchronous else hvd.grouped_allreduce
        return function(self._members(self.rank), name=self.spec["name"], op=REDUCE_OPS[self.spec["op"]])

    def _expected_grouped_allreduce(self):
        per_rank = [self._members(r) for r in range(self.size)]
        return [
            reduce_exact([inputs[i] for inputs in per_rank], dtype, self.spec["op"], self.size)
            for i, (dtype, _) in enumerate(self.spec["members"])
        ]

    # data movement

    def _gather_input(self, rank):
        rows, cols = self.spec["rows"][rank], self.spec["cols"]
        return self._input(rank, self.spec["dtype"], rows * cols, (rows, cols))

    def _allgather(self, asynchronous):
        function = hvd.allgather_async if asynchronous else hvd.allgather
        return function(self._gather_input(self.rank), name=self.spec["name"])

    def _expected_allgather(self):
        return np.concatenate([self._gather_input(r) for r in range(self.size)])

    def _broadcast_input(self, rank):
        return self._input(rank, self.spec["dtype"], self.spec["elements"])

    def _broadcast(self, asynchronous):
        function = hvd.broadcast_async if asynchronous else hvd.broadcast
        return function(self._broadcast_input(self.rank), self.spec["root"], name=self.spec["name"])

    def _expected_broadcast(self):
        return self._broadcast_input(self.spec["root"])

    def _alltoall_input(self, rank):
        rows, cols = sum(self.spec["splits"][rank]), self.spec["cols"]
        return self._input(rank, self.spec["dtype"], rows * cols, (rows, cols))

    def _alltoall(self, asynchronous):
        function = hvd.alltoall_async if asynchronous else hvd.alltoall
        return function(self._alltoall_input(self.rank), splits=self.spec["splits"][self.rank], name=self.spec["name"])

    def _expected_alltoall(self):
        pieces = []
        for sender in range(self.size):
            splits = self.spec["splits"][sender]
            start = sum(splits[: self.rank])
            pieces.append(self._alltoall_input(sender)[start : start + splits[self.rank]])
        received = [row[self.rank] for row in self.spec["splits"]]
        return np.concatenate(pieces), np.asarray(received, np.int32)

    def _scatter_input(self, rank):
        rows, cols = self.spec["rows"], self.spec["cols"]
        return self._input(rank, self.spec["dtype"], rows * cols, (rows, cols))

    def _reducescatter(self, asynchronous):
        function = hvd.reducescatter_async if asynchronous else hvd.reducescatter
        return function(self._scatter_input(self.rank), name=self.spec["name"], op=REDUCE_OPS[self.spec["op"]])

    def _expected_reducescatter(self):
        reduced = reduce_exact(
            [self._scatter_input(r) for r in range(self.size)], self.spec["dtype"], self.spec["op"], self.size
        )
        rows = self.spec["rows"]
        counts = [rows // self.size + (r < rows % self.size) for r in range(self.size)]
        start = sum(counts[: self.rank])
        return reduced[start : start + counts[self.rank]]

    def _barrier(self, asynchronous):
        hvd.barrier()  # synchronous only; nothing to wait for afterwards
        return None

    def _expected_barrier(self):
        return None


def _compare(actual, expected, what):
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise AssertionError(f"{what}: expected {len(expected)} results, got {type(actual).__name__}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, f"{what} [{i}]")
        return
    if expected is None:
        if actual is not None:
            raise AssertionError(f"{what}: expected no result, got {type(actual).__name__}")
        return
    if not isinstance(actual, np.ndarray) or actual.dtype != expected.dtype or actual.shape != expected.shape:
        raise AssertionError(
            f"{what}: got {getattr(actual, 'dtype', type(actual))} {getattr(actual, 'shape', '')}, "
            f"expected {expected.dtype} {expected.shape}"
        )
    got = actual.astype(np.float64) if actual.dtype in HALF_FLOATS else actual
    want = expected.astype(np.float64) if expected.dtype in HALF_FLOATS else expected
    if not np.array_equal(got, want):
        where = np.argwhere(got != want)[0]
        raise AssertionError(
            f"{what}: first difference at {tuple(where)}: got {got[tuple(where)]}, expected {want[tuple(where)]}"
        )
