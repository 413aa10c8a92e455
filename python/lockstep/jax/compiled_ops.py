"""Collectives on traced JAX values: one XLA FFI custom call per collective (a
whole pytree is one call, so the core fuses it), with the negotiation name fixed
at trace time.

Output shapes must be static inside jit, while allgather, alltoall and
reducescatter results are only sized after negotiation. So:
- allgather assumes every rank has this rank's first dimension, unless `sizes`
  (every rank's first dimension) is given;
- alltoall without splits assumes every rank has this rank's shape; with splits it
  also needs `received_splits` (rows from each rank);
- reducescatter gives the first ranks the extra rows, as the core does.
A rank whose actual result differs from the traced shape gets a clear error.

The custom calls are pure functions of their inputs to JAX and XLA, as JAX's own
psum is (no side effect declared): JAX then dispatches the jitted program through
its C++ fast path, where a side-effecting call sends every call of the program
through Python dispatch (about 200 us more per call here). What XLA may do to a pure
call it does the same way on every rank, since every rank compiles the same
program: a collective whose result is never used is dropped everywhere, and one
whose inputs do not change inside a loop may be hoisted out of it everywhere.

Under jax.vmap every rank must map over the same batch size. Allreduce and
broadcast work element by element, so a batch is just a larger tensor (XLA
broadcasts unbatched inputs of a group to the batch: vmap_method="broadcast_all").
The ops that work on rows (allgather, alltoall, reducescatter) act on each batch
member's rows: see rows_vmappable.
"""

import jax
import jax.numpy as jnp
import numpy as np

from lockstep import _core
from lockstep.common import basics, validation
from lockstep.common.naming import LOCKSTEP_FRAMES, TraceNamer
from lockstep.common.ops import Average, to_core_reduce_op
from lockstep.jax import ffi_library

# JAX's own frames (jit, grad, custom_vjp) sit between the user's call and lockstep.
_NAMER = TraceNamer(skip=LOCKSTEP_FRAMES + ("jax.", "jaxlib."))

_NO_SPLITS = np.zeros(0, np.int64)


def call(
    op_type,
    kind,
    inputs,
    out_types,
    name,
    reduce_op=Average,
    prescale=1.0,
    postscale=1.0,
    root_rank=0,
    splits=_NO_SPLITS,
    allowed_ops=None,
    set_id=0,
    elementwise=False,
    in_place=False,
):
    """Bind one custom call over `inputs` (a list) producing `out_types` (a list of
    jax.ShapeDtypeStruct); returns the list of outputs. in_place: output i is input
    i's buffer (XLA copies an input that is still needed elsewhere), so the core
    reduces in XLA's buffers without an output to allocate and fill."""
    basics.require_initialized()  # at trace time, so the error is not deferred to a run
    target = ffi_library.ensure_registered()
    if set_id != 0:
        rank_and_size(set_id)  # a set this rank is not in fails while tracing, not when run
    core_op = to_core_reduce_op(reduce_op, allowed_ops, kind) if allowed_ops else _core.ReduceOp.AVERAGE
    prescale = validation.as_scale_factor(prescale, "prescale_factor")
    postscale = validation.as_scale_factor(postscale, "postscale_factor")
    splits = np.asarray(splits, np.int64)
    # The core's own checks, while tracing: a mistake is reported where it is written,
    # not by every run of the compiled program.
    for x in inputs:
        validation.check_op(
            op_type,
            x.shape,
            validation.core_dtype(x.dtype),
            reduce_op=core_op,
            prescale=prescale,
            postscale=postscale,
            root_rank=int(root_rank),
            splits=splits.tolist(),
            ps=set_id,
            name=name if isinstance(name, str) else None,
        )
    attributes = dict(
        op=np.int32(int(op_type)),
        name=traced_name(kind, name),
        reduce_op=np.int32(int(core_op)),
        prescale=np.float64(prescale),
        postscale=np.float64(postscale),
        root_rank=np.int32(root_rank),
        splits=splits,
        process_set_id=np.int32(set_id),
    )
    vmap_method = "broadcast_all" if elementwise else None
    aliases = {i: i for i in range(len(inputs))} if in_place else None
    run = jax.ffi.ffi_call(target, list(out_types), vmap_method=vmap_method, input_output_aliases=aliases)
    return list(run(*inputs, **attributes))


def traced_name(kind, name):
    """The negotiation name of a collective being traced (lockstep.common.naming)."""
    return _NAMER.name_for(kind, validation.check_name(name), _tracing())


def _tracing():
    """Whether JAX is tracing (jit, grad...), as opposed to dispatching eagerly."""
    from jax._src import core  # noqa: PLC0415 - no public equivalent; without it every call counts as traced

    clean = getattr(core, "trace_state_clean", None)
    return clean is None or not clean()


def rows_vmappable(function, batched_outputs):
    """`function(x)`, a collective over the rows (first dimension) of x, under jax.vmap
    as well: the batch axis moves behind the rows for the one collective, so each
    batch member's rows are gathered, exchanged or scattered, and moves back in front.
    `batched_outputs`: per output, whether it has the batch axis (alltoall's received
    splits do not)."""
    mapped = jax.custom_batching.custom_vmap(function)

    @mapped.def_vmap
    def rule(axis_size, in_batched, x):
        if not in_batched[0]:
            outputs = mapped(x)
            return outputs, jax.tree_util.tree_map(lambda _: False, outputs)
        outputs = mapped(jnp.moveaxis(x, 0, 1))
        if not isinstance(outputs, (tuple, list)):
            return jnp.moveaxis(outputs, 1, 0), True
        moved = [jnp.moveaxis(o, 1, 0) if b else o for o, b in zip(outputs, batched_outputs)]
        return type(outputs)(moved), type(outputs)(batched_outputs)

    return mapped


def same_shape(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def with_rows(x, rows):
    return jax.ShapeDtypeStruct((rows,) + tuple(x.shape[1:]), x.dtype)


def rank_and_size(set_id):
    """This rank's position in the process set and the set's size (the global set: 0)."""
    if set_id == 0:
        return basics.rank(), basics.size()
    ranks = _core.process_set_ranks(set_id)
    if basics.rank() not in ranks:
        raise ValueError(f"rank {basics.rank()} is not in process set {set_id} (its ranks are {ranks})")
    return ranks.index(basics.rank()), len(ranks)


def allgather_rows(x, sizes, set_id=0):
    validation.check_op(OP.ALLGATHER, x.shape, ps=set_id)
    me, n = rank_and_size(set_id)
    if sizes is None:
        return x.shape[0] * n
    sizes = [validation.as_int(s, "each entry of sizes") for s in sizes]
    if len(sizes) != n or sizes[me] != x.shape[0]:
        raise ValueError(
            f"allgather sizes={sizes} must give every rank's first dimension ({n} entries), "
            f"with this rank's ({x.shape[0]}) at index {me}"
        )
    return sum(sizes)


def reducescatter_rows(x, set_id=0):
    validation.check_op(OP.REDUCESCATTER, x.shape, reduce_op=_core.ReduceOp.SUM, ps=set_id)
    me, n = rank_and_size(set_id)
    rows = x.shape[0]
    return rows // n + (1 if me < rows % n else 0)


def alltoall_layout(x, splits, received_splits, set_id=0):
    """(splits to send, rows received) for a traced alltoall."""
    if splits is None:
        validation.check_op(OP.ALLTOALL, x.shape, ps=set_id)
        return _NO_SPLITS, x.shape[0]
    try:
        splits = np.asarray(splits)
    except jax.errors.TracerArrayConversionError:
        raise ValueError(
            "alltoall inside jax.jit needs concrete splits (a list or numpy array), not a traced array"
        ) from None
    counts = validation.as_splits(splits)
    validation.check_op(OP.ALLTOALL, x.shape, splits=counts, ps=set_id)
    if received_splits is None:
        raise ValueError(
            "alltoall with splits inside jax.jit needs received_splits= (rows this rank receives from each "
            "rank), because the result's shape must be known when tracing"
        )
    return np.asarray(counts, np.int64), sum(_received_rows(received_splits, rank_and_size(set_id)[1]))


def _received_rows(received_splits, n):
    """received_splits, the rows this rank receives from each rank, as ints: JAX's own
    argument (the core learns them in negotiation), so checked here."""
    received = validation.as_splits(received_splits)
    if len(received) != n or any(rows < 0 for rows in received):
        raise ValueError(f"received_splits must give the rows received from each of the {n} ranks, got {received}")
    return received


OP = _core.OpType
