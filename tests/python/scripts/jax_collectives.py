"""lockstep.jax under mpirun: every collective and dtype (bfloat16 included),
eagerly and inside jax.jit, with exact values; grouped allreduce of a pytree;
many independent collectives in one jitted function, repeated; gradients through
allreduce, eagerly and under jit."""

import jax

jax.config.update("jax_enable_x64", True)  # int64 and float64 arrays exist only with x64

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from checks import check  # noqa: E402
from data_movement import encoded_rows, scatter_counts, uneven_splits  # noqa: E402
from rank_checks import (  # noqa: E402
    ALL_DTYPES,
    BOOL,
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    assert_equal,
    average_values,
    expected_reduction,
    product_values,
    rank_values,
    run_main,
)

import lockstep.jax as hvd  # noqa: E402

OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max, "Product": hvd.Product}


def inputs_for(dtype, shape, op_name, size):
    if op_name == "Product":
        return [product_values(dtype, shape, r) for r in range(size)]
    if op_name == "Average":
        return [average_values(dtype, shape, r, size) for r in range(size)]
    return [rank_values(dtype, shape, r) for r in range(size)]


def expect_array(actual, expected, what):
    assert isinstance(actual, jax.Array), f"{what}: expected a jax.Array, got {type(actual).__name__}"
    assert_equal(np.asarray(actual), expected, what)


def allreduce_cases(size):
    """(key, input on each rank, op, prescale, postscale, expected) for every dtype x op, and scaling."""
    cases = []
    for dtype in ALL_DTYPES:
        for op_name in ["Sum", "Min", "Max", "Product"] if dtype == BOOL else list(OPS):
            for shape in [(3, 4), ()]:
                inputs = inputs_for(dtype, shape, op_name, size)
                cases.append(
                    (
                        f"{dtype.name} {op_name} {shape}",
                        inputs,
                        op_name,
                        1.0,
                        1.0,
                        expected_reduction(inputs, dtype, op_name, size),
                    )
                )
    for dtype in NUMERIC_DTYPES:
        prescale, postscale = (0.5, 4.0) if dtype in FLOAT_DTYPES else (2.0, 3.0)
        inputs = inputs_for(dtype, (5,), "Sum", size)
        cases.append(
            (
                f"{dtype.name} Sum scaled",
                inputs,
                "Sum",
                prescale,
                postscale,
                expected_reduction(inputs, dtype, "Sum", size, prescale, postscale),
            )
        )
    return cases


def check_allreduce(rank, size):
    cases = allreduce_cases(size)
    for key, inputs, op_name, pre, post, expected in cases:
        expect_array(
            hvd.allreduce(jnp.asarray(inputs[rank]), op=OPS[op_name], prescale_factor=pre, postscale_factor=post),
            expected,
            f"eager allreduce {key}",
        )

    # Every case in one jitted function: independent collectives XLA may order freely.
    @jax.jit
    def all_cases(xs):
        return [
            hvd.allreduce(x, op=OPS[op_name], prescale_factor=pre, postscale_factor=post)
            for x, (_, _, op_name, pre, post, _) in zip(xs, cases)
        ]

    mine = [jnp.asarray(inputs[rank]) for _, inputs, *_ in cases]
    for repeat in range(3):
        for result, (key, *_, expected) in zip(all_cases(mine), cases):
            expect_array(result, expected, f"jit allreduce {key} (run {repeat})")
    print(f"rank {rank}: {len(cases)} allreduces in one jitted function, 3 runs", flush=True)


def check_scaling_matches_eager(rank, size):
    """Inside jit, Sum and Average of floating tensors scale in the compiled program
    rather than in the core: the values must still be the core's (eager) bit for bit,
    with factors that are not exact in any dtype and sums that are not multiples of
    the size, grouped and alone, in place (the optimizers' path) and not."""
    from lockstep.jax import mpi_ops

    rng = np.random.default_rng(1234 + rank)
    cases = []
    for dtype in FLOAT_DTYPES:
        x = jnp.asarray(rng.normal(size=(7, 3)).astype(dtype))
        for op_name, pre, post in (("Average", 1.0, 1.0), ("Average", 0.1, 0.7), ("Sum", 1 / 3, 3.3)):
            cases.append((f"{dtype.name} {op_name} pre={pre:.3g} post={post:.3g}", x, OPS[op_name], pre, post))
    eager = [hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post) for _, x, op, pre, post in cases]

    @jax.jit
    def alone(xs):
        return [
            hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post)
            for x, (_, _, op, pre, post) in zip(xs, cases)
        ]

    @jax.jit
    def grouped_in_place(xs):
        out = []
        for x, (_, _, op, pre, post) in zip(xs, cases):
            out += mpi_ops.reduce_pytree(
                [x * 1], None, hvd.Compression.none, op, pre, post, hvd.global_process_set, in_place=True
            )
        return out

    for how, function in (("alone", alone), ("grouped in place", grouped_in_place)):
        for result, expected, (key, *_) in zip(function([x for _, x, *_ in cases]), eager, cases):
            expect_array(result, np.asarray(expected), f"jit allreduce {key} ({how}) vs eager")
    print(f"rank {rank}: {len(cases)} scaled float allreduces inside jit equal eager bit for bit", flush=True)


def check_grouped_allreduce(rank, size):
    tree = {
        "w": jnp.asarray(rank_values(np.dtype(np.float32), (4, 3), rank)),
        "b": [
            jnp.asarray(rank_values(FLOAT_DTYPES[1], (3,), rank)),
            jnp.asarray(rank_values(np.dtype(np.int32), (2,), rank)),
        ],
    }
    per_rank = [
        {
            "w": rank_values(np.dtype(np.float32), (4, 3), r),
            "b": [rank_values(FLOAT_DTYPES[1], (3,), r), rank_values(np.dtype(np.int32), (2,), r)],
        }
        for r in range(size)
    ]
    expected = jax.tree.map(lambda *xs: expected_reduction(list(xs), xs[0].dtype, "Sum", size), *per_rank)
    for label, fn in [("eager", hvd.grouped_allreduce), ("jit", jax.jit(hvd.grouped_allreduce, static_argnames="op"))]:
        for repeat in range(2):
            result = fn(tree, op=hvd.Sum)
            assert jax.tree.structure(result) == jax.tree.structure(tree), f"{label} grouped_allreduce keeps the pytree"
            jax.tree.map(lambda a, e: expect_array(a, e, f"{label} grouped_allreduce (run {repeat})"), result, expected)


def check_allgather(rank, size):
    rows_of = lambda r: r + 1  # noqa: E731 (uneven first dimensions)
    sizes = [rows_of(r) for r in range(size)]
    dtypes = ALL_DTYPES
    parts = {d: [encoded_rows(d, r, rows_of(r)) for r in range(size)] for d in dtypes}
    for d in dtypes:
        expect_array(hvd.allgather(jnp.asarray(parts[d][rank])), np.concatenate(parts[d]), f"eager allgather {d.name}")
    gather_all = jax.jit(lambda xs: [hvd.allgather(x, sizes=sizes) for x in xs])
    even = jax.jit(lambda x: hvd.allgather(x))
    for repeat in range(2):
        for d, result in zip(dtypes, gather_all([jnp.asarray(parts[d][rank]) for d in dtypes])):
            expect_array(result, np.concatenate(parts[d]), f"jit allgather {d.name} with sizes (run {repeat})")
        same = [encoded_rows(BOOL, r, 2) for r in range(size)]
        expect_array(even(jnp.asarray(same[rank])), np.concatenate(same), "jit allgather of equal first dimensions")


def check_broadcast(rank, size):
    for root in range(size):
        for d in ALL_DTYPES:
            sent = jnp.asarray(rank_values(d, (2, 3), rank))
            expect_array(
                hvd.broadcast(sent, root), rank_values(d, (2, 3), root), f"eager broadcast {d.name} from {root}"
            )
        jitted = jax.jit(lambda xs, root=root: [hvd.broadcast(x, root) for x in xs])
        for d, result in zip(ALL_DTYPES, jitted([jnp.asarray(rank_values(d, (2, 3), rank)) for d in ALL_DTYPES])):
            expect_array(result, rank_values(d, (2, 3), root), f"jit broadcast {d.name} from {root}")


def check_broadcast_of_unsigned_words(rank, size):
    """uint32 (Keras' seed state) travels bit for bit as int32."""
    sent = jnp.asarray(np.array([rank, 2**32 - 1 - rank], np.uint32))
    expected = np.array([size - 1, 2**32 - size], np.uint32)
    expect_array(hvd.broadcast(sent, size - 1), expected, "eager broadcast of uint32")
    expect_array(jax.jit(lambda x: hvd.broadcast(x, size - 1))(sent), expected, "jit broadcast of uint32")
    tree = jax.jit(lambda t: hvd.broadcast_parameters(t, size - 1))({"seed": sent, "w": jnp.ones(2) * rank})
    expect_array(tree["seed"], expected, "broadcast_parameters of uint32 in jit")


def expected_alltoall(d, rank, size, splits_of):
    pieces = []
    for sender in range(size):
        splits = splits_of(sender)
        rows = encoded_rows(d, sender, sum(splits))
        start = sum(splits[:rank])
        pieces.append(rows[start : start + splits[rank]])
    return np.concatenate(pieces)


def check_alltoall(rank, size):
    even = lambda s: [2] * size  # noqa: E731
    for d in ALL_DTYPES:
        sent = jnp.asarray(encoded_rows(d, rank, 2 * size))
        expect_array(hvd.alltoall(sent), expected_alltoall(d, rank, size, even), f"eager alltoall {d.name}")
        expect_array(jax.jit(hvd.alltoall)(sent), expected_alltoall(d, rank, size, even), f"jit alltoall {d.name}")
        splits = uneven_splits(rank, size)
        received = [uneven_splits(s, size)[rank] for s in range(size)]
        sent = jnp.asarray(encoded_rows(d, rank, sum(splits)))
        expected = expected_alltoall(d, rank, size, lambda s: uneven_splits(s, size))
        result, got_splits = hvd.alltoall(sent, splits=splits)
        expect_array(result, expected, f"eager alltoall with splits {d.name}")
        expect_array(got_splits, np.array(received, np.int32), f"eager alltoall received splits {d.name}")
        result, got_splits = jax.jit(lambda x: hvd.alltoall(x, splits=splits, received_splits=received))(sent)
        expect_array(result, expected, f"jit alltoall with splits {d.name}")
        expect_array(got_splits, np.array(received, np.int32), f"jit alltoall received splits {d.name}")


def check_reducescatter(rank, size):
    for d in ALL_DTYPES:
        for op_name in ["Sum"] if d == BOOL else ["Sum", "Average"]:
            rows = 2 * size + 1
            make = average_values if op_name == "Average" else (lambda dt, s, r, n: rank_values(dt, s, r))
            inputs = [make(d, (rows, 3), r, size) for r in range(size)]
            counts = scatter_counts(rows, size)
            start = sum(counts[:rank])
            expected = expected_reduction(inputs, d, op_name, size)[start : start + counts[rank]]
            x = jnp.asarray(inputs[rank])
            expect_array(hvd.reducescatter(x, op=OPS[op_name]), expected, f"eager reducescatter {d.name} {op_name}")
            jitted = jax.jit(lambda x, op=OPS[op_name]: hvd.reducescatter(x, op=op))
            expect_array(jitted(x), expected, f"jit reducescatter {d.name} {op_name}")


def check_gradients(rank, size):
    x = jnp.arange(4, dtype=jnp.float32) + rank
    total = sum(np.arange(4, dtype=np.float32) + r for r in range(size))
    for op_name, scale in [("Sum", 1.0), ("Average", 1.0 / size)]:
        # loss = sum(allreduce(x)^2); d loss / d x_r = sum over ranks of 2 * y * scale.
        y = total * scale
        expected = (2 * y * scale * size).astype(np.float32)
        loss = lambda x, op=OPS[op_name]: jnp.sum(hvd.allreduce(x, op=op) ** 2)  # noqa: E731
        expect_array(jax.grad(loss)(x), expected, f"eager grad through allreduce {op_name}")
        expect_array(jax.jit(jax.grad(loss))(x), expected, f"jit grad through allreduce {op_name}")
    scaled = lambda x: jnp.sum(hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5))  # noqa: E731
    expect_array(jax.jit(jax.grad(scaled))(x), np.full(4, size, np.float32), "grad with pre/postscale")
    tree_loss = lambda t: sum(jnp.sum(v) for v in jax.tree.leaves(hvd.grouped_allreduce(t, op=hvd.Sum)))  # noqa: E731
    grads = jax.jit(jax.grad(tree_loss))({"a": x, "b": jnp.ones(2, jnp.bfloat16)})
    expect_array(grads["a"], np.full(4, size, np.float32), "grad through grouped_allreduce")


def check_vmap(rank, size):
    """Under jax.vmap (eager and jitted) each batch member gets the collective's result
    for its own slice: element by element for allreduce and broadcast, over its own
    rows for allgather, alltoall and reducescatter."""
    batch = 3
    x = jnp.stack([jnp.full((2 * size, 3), rank * 10 + b, jnp.float32) for b in range(batch)])
    rank_sum = sum(r * 10 for r in range(size))
    summed = np.stack([np.full((2 * size, 3), rank_sum + size * b, np.float32) for b in range(batch)])
    for wrap, how in ((lambda f: f, "eager"), (jax.jit, "jit")):
        expect_array(wrap(jax.vmap(lambda v: hvd.allreduce(v, op=hvd.Sum)))(x), summed, f"vmap allreduce ({how})")
        ones = jnp.ones(4, jnp.int32)
        group = wrap(jax.vmap(lambda v: hvd.grouped_allreduce([v, ones], op=hvd.Sum)))(x)
        expect_array(group[0], summed, f"vmap grouped_allreduce, batched member ({how})")
        expect_array(group[1], np.full((batch, 4), size, np.int32), f"vmap grouped_allreduce, unbatched member ({how})")
        shared = wrap(jax.vmap(lambda v: hvd.broadcast(v, size - 1)))(x)
        expect_array(
            shared,
            np.stack([np.full((2 * size, 3), (size - 1) * 10 + b, np.float32) for b in range(batch)]),
            f"vmap broadcast ({how})",
        )
        gathered = wrap(jax.vmap(hvd.allgather))(x[:, :2])
        expect_array(
            gathered,
            np.stack(
                [
                    np.repeat(np.arange(size, dtype=np.float32) * 10 + b, 2 * 3).reshape(2 * size, 3)
                    for b in range(batch)
                ]
            ),
            f"vmap allgather ({how})",
        )
        scattered = wrap(jax.vmap(lambda v: hvd.reducescatter(v, op=hvd.Sum)))(x)
        expect_array(scattered, summed[:, :2], f"vmap reducescatter ({how})")
        rows = jnp.stack(
            [
                jnp.repeat(jnp.arange(size, dtype=jnp.float32) * 100 + rank * 10 + b, 2).reshape(2 * size, 1)
                for b in range(batch)
            ]
        )  # row pair i goes to rank i
        exchanged = wrap(jax.vmap(hvd.alltoall))(rows)
        expect_array(
            exchanged,
            np.stack(
                [
                    np.repeat(np.arange(size, dtype=np.float32) * 10 + rank * 100 + b, 2).reshape(2 * size, 1)
                    for b in range(batch)
                ]
            ),
            f"vmap alltoall ({how})",
        )


def check_pure_calls_agree_everywhere(rank, size):
    """The custom calls are pure to XLA: what it drops, hoists or keeps, it does the
    same on every rank, so none of these hangs and each result is exact."""
    x = jnp.full(3, rank + 1.0, jnp.float32)
    total = size * (size + 1) / 2

    @jax.jit
    def with_unused(v):
        hvd.allreduce(v, op=hvd.Sum, name="pure.unused")  # result never used
        return hvd.allreduce(v * 2, op=hvd.Sum, name="pure.used")

    @jax.jit
    def loop_invariant(v):  # the same input every iteration
        return jax.lax.fori_loop(0, 3, lambda i, acc: acc + hvd.allreduce(v, op=hvd.Sum, name="pure.inv"), v * 0)

    @jax.jit
    def loop_carried(v):  # each iteration reduces the last one's result
        return jax.lax.fori_loop(0, 3, lambda i, acc: acc + hvd.allreduce(acc, op=hvd.Sum, name="pure.carry"), v)

    @jax.jit
    def in_a_branch(v, on):
        return jax.lax.cond(on, lambda u: hvd.allreduce(u, op=hvd.Sum, name="pure.branch"), lambda u: u * 0, v)

    carried = np.arange(1, size + 1, dtype=np.float32)
    for _ in range(3):
        carried = carried + carried.sum()
    for repeat in range(3):
        expect_array(
            with_unused(x), np.full(3, 2 * total, np.float32), f"jit allreduce beside an unused one (run {repeat})"
        )
        expect_array(
            loop_invariant(x), np.full(3, 3 * total, np.float32), f"allreduce of a loop invariant (run {repeat})"
        )
        expect_array(
            loop_carried(x), np.full(3, carried[rank], np.float32), f"allreduce of a loop carry (run {repeat})"
        )
        expect_array(in_a_branch(x, repeat % 2 == 0), np.full(3, total if repeat % 2 == 0 else 0, np.float32), "cond")
    expect_array(
        hvd.allreduce(x, op=hvd.Sum, name="pure.after"), np.full(3, total, np.float32), "eager allreduce after"
    )
    print(f"rank {rank}: pure compiled collectives agree on every rank", flush=True)


def check_objects(rank, size):
    assert hvd.broadcast_object({"from": rank}, root_rank=size - 1) == {"from": size - 1}, "broadcast_object"
    assert hvd.allgather_object(rank * 2) == [r * 2 for r in range(size)], "allgather_object"
    hvd.barrier()


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check(check_allreduce, rank, size)
    check(check_scaling_matches_eager, rank, size)
    check(check_grouped_allreduce, rank, size)
    check(check_allgather, rank, size)
    check(check_broadcast, rank, size)
    check(check_broadcast_of_unsigned_words, rank, size)
    check(check_alltoall, rank, size)
    check(check_reducescatter, rank, size)
    check(check_gradients, rank, size)
    check(check_vmap, rank, size)
    check(check_pure_calls_agree_everywhere, rank, size)
    check(check_objects, rank, size)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
