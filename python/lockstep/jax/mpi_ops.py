"""lockstep's collectives on jax.Arrays.

Concrete arrays (eager code) go through lockstep.common.host_ops on the host; traced values
(inside jax.jit, jax.grad, lax control flow) become XLA FFI custom calls
(compiled_ops), as do eager arrays on a GPU (device_arrays). Both return jax.Arrays
with Horovod's semantics.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from lockstep.common import host_ops as _host
from lockstep.common import validation
from lockstep.common.ops import (
    ALLREDUCE_OPS,
    LINEAR_OPS,
    Adasum,
    Average,
    Sum,
    handle_average_backwards_compatibility,
)
from lockstep.common.process_sets import global_process_set, process_set_id
from lockstep.jax import compiled_ops as compiled
from lockstep.jax import device_arrays
from lockstep.jax.compression import Compression

_ALLREDUCE_OPS = tuple(op for op in ALLREDUCE_OPS if op != Adasum)  # Adasum has no compiled path
_DIFFERENTIABLE_OPS = LINEAR_OPS


def _is_traced(*values):
    """Whether the values take the custom call: traced, or eager on a GPU."""
    return any(isinstance(v, jax.core.Tracer) for v in values) or device_arrays.on_gpu(*values)


def _host_array(x):
    return np.asarray(x)


def allreduce(
    tensor,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduce `tensor` over all ranks of `process_set` (Average by default).
    Differentiable for Sum and Average: the gradient is the same allreduce of the
    cotangent. `compression` (Compression.fp16 or .bf16) sends floating tensors in
    the narrower type."""
    op = handle_average_backwards_compatibility(op, average)
    compression = _compressor(compression)
    tensor, context = compression.compress(jnp.asarray(tensor))
    return compression.decompress(
        _allreduce_one(tensor, name, op, prescale_factor, postscale_factor, process_set), context
    )


def _compressor(compression):
    if compression is None:
        return Compression.none
    if not (hasattr(compression, "compress") and hasattr(compression, "decompress")):
        raise TypeError(
            f"compression must be a lockstep.jax Compression choice (none, fp16, bf16) or have "
            f"compress/decompress, got {compression!r}"
        )
    return compression


def _allreduce_one(tensor, name, op, prescale_factor, postscale_factor, process_set):
    if not _is_traced(tensor):
        return jnp.asarray(
            _host.allreduce(
                _host_array(tensor),
                name=name,
                op=op,
                prescale_factor=prescale_factor,
                postscale_factor=postscale_factor,
                process_set=process_set,
            )
        )
    return _grouped_traced([tensor], name, op, prescale_factor, postscale_factor, process_set_id(process_set))[0]


def grouped_allreduce(
    tensors,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Allreduce every leaf of a pytree (a list of arrays, a dict of parameters...) as
    one group, which the core negotiates together and fuses; returns the same pytree."""
    op = handle_average_backwards_compatibility(op, average)
    return reduce_pytree(tensors, name, compression, op, prescale_factor, postscale_factor, process_set)


def reduce_pytree(tensors, name, compression, op, prescale_factor, postscale_factor, process_set, in_place=False):
    """grouped_allreduce's work. in_place (inside jit): the results take the leaves'
    buffers (for gradients, which nothing reads after their reduction)."""
    leaves, tree = jax.tree_util.tree_flatten(tensors)
    if not leaves:
        return tensors
    compression = _compressor(compression)
    compressed = [compression.compress(jnp.asarray(leaf)) for leaf in leaves]
    sent = [leaf for leaf, _ in compressed]
    if _is_traced(*sent):
        reduced = _grouped_traced(
            sent, name, op, prescale_factor, postscale_factor, process_set_id(process_set), in_place
        )
    else:
        reduced = [
            jnp.asarray(r)
            for r in _host.grouped_allreduce(
                [_host_array(leaf) for leaf in sent],
                name=name,
                op=op,
                prescale_factor=prescale_factor,
                postscale_factor=postscale_factor,
                process_set=process_set,
            )
        ]
    restored = [compression.decompress(r, context) for r, (_, context) in zip(reduced, compressed)]
    return jax.tree_util.tree_unflatten(tree, restored)


def _grouped_traced(leaves, name, op, prescale, postscale, set_id, in_place=False):
    if op in _DIFFERENTIABLE_OPS and all(jnp.issubdtype(leaf.dtype, jnp.inexact) for leaf in leaves):
        return list(
            _differentiable_allreduce(op, float(prescale), float(postscale), name, set_id, in_place, tuple(leaves))
        )
    return _allreduce_call(leaves, name, op, prescale, postscale, set_id, in_place)


def _allreduce_call(leaves, name, op, prescale, postscale, set_id, in_place=False):
    if op in _DIFFERENTIABLE_OPS and all(jnp.issubdtype(x.dtype, jnp.floating) for x in leaves):
        # The scaling runs in the compiled program, where XLA fuses it into the code that
        # produces and consumes the gradients, rather than as passes of the core over them.
        # The arithmetic is the core's (Horovod's): float(factor) * x in the tensor's own
        # precision, 16-bit types in float32; Average is a Sum scaled by postscale / size.
        before = validation.as_scale_factor(prescale, "prescale_factor")
        after = validation.as_scale_factor(postscale, "postscale_factor")
        if op == Average:
            after /= compiled.rank_and_size(set_id)[1]
        summed = _reduction([_scaled(x, before) for x in leaves], name, Sum, 1.0, 1.0, set_id, in_place)
        return [_scaled(x, after) for x in summed]
    return _reduction(leaves, name, op, prescale, postscale, set_id, in_place)


def _reduction(leaves, name, op, prescale, postscale, set_id, in_place):
    return compiled.call(
        compiled.OP.ALLREDUCE,
        "allreduce",
        leaves,
        [compiled.same_shape(x) for x in leaves],
        name,
        reduce_op=op,
        prescale=prescale,
        postscale=postscale,
        allowed_ops=_ALLREDUCE_OPS,
        set_id=set_id,
        elementwise=True,
        in_place=in_place,
    )


def _scaled(x, factor):
    """float(factor) * x rounded to x's type, as the core scales (16-bit types in float32)."""
    if factor == 1.0:
        return x
    if x.dtype in (jnp.float16, jnp.bfloat16):
        return (x.astype(jnp.float32) * np.float32(factor)).astype(x.dtype)
    return x * np.asarray(factor, x.dtype)


# The gradient of y = post * sum_r(pre * x_r) with respect to each rank's x is
# pre * post * sum_r(dy_r): the same reduction of the cotangents (Average likewise).
@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4, 5))
def _differentiable_allreduce(op, prescale, postscale, name, set_id, in_place, leaves):
    return tuple(_allreduce_call(list(leaves), name, op, prescale, postscale, set_id, in_place))


def _allreduce_fwd(op, prescale, postscale, name, set_id, in_place, leaves):
    return _differentiable_allreduce(op, prescale, postscale, name, set_id, in_place, leaves), None


def _allreduce_bwd(op, prescale, postscale, name, set_id, in_place, _, cotangents):
    grad_name = None if name is None else f"{name}.grad"
    return (tuple(_allreduce_call(list(cotangents), grad_name, op, prescale, postscale, set_id, in_place)),)


_differentiable_allreduce.defvjp(_allreduce_fwd, _allreduce_bwd)


def allgather(tensor, name=None, sizes=None, process_set=global_process_set):
    """Concatenate every rank's `tensor` along the first dimension (which may differ
    between ranks). Inside jit the result's size is fixed when tracing: every rank is
    assumed to have this rank's first dimension unless `sizes` lists them all."""
    tensor = jnp.asarray(tensor)
    if not _is_traced(tensor):
        return jnp.asarray(_host.allgather(_host_array(tensor), name=name, process_set=process_set))
    set_id = process_set_id(process_set)
    if sizes is None and tensor.ndim and device_arrays.on_gpu(tensor):
        sizes = device_arrays.first_dims(tensor, process_set)
    if sizes is not None:
        compiled.allgather_rows(tensor, sizes, set_id)  # checked against the unbatched shape

    def gather(x):
        rows = compiled.allgather_rows(x, sizes, set_id)
        return compiled.call(
            compiled.OP.ALLGATHER, "allgather", [x], [compiled.with_rows(x, rows)], name, set_id=set_id
        )[0]

    return compiled.rows_vmappable(gather, (True,))(tensor)


# Broadcast only moves bits, so unsigned types the core lacks travel as the signed
# type of the same width (Keras' seed generators keep uint32 state, for example).
_AS_SIGNED = {jnp.dtype(jnp.uint32): jnp.int32, jnp.dtype(jnp.uint64): jnp.int64}


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's `tensor` on every rank (of the set; root_rank is a global rank)."""
    tensor = jnp.asarray(tensor)
    if tensor.dtype in _AS_SIGNED:
        sent = jax.lax.bitcast_convert_type(tensor, _AS_SIGNED[tensor.dtype])
        return jax.lax.bitcast_convert_type(broadcast(sent, root_rank, name, process_set), tensor.dtype)
    if not _is_traced(tensor):
        return jnp.asarray(_host.broadcast(_host_array(tensor), root_rank, name=name, process_set=process_set))
    root_rank = validation.check_root_rank(root_rank)
    return compiled.call(
        compiled.OP.BROADCAST,
        "broadcast",
        [tensor],
        [compiled.same_shape(tensor)],
        name,
        root_rank=root_rank,
        set_id=process_set_id(process_set),
        elementwise=True,
    )[0]


def grouped_broadcast(tensors, root_rank, name=None, process_set=global_process_set):
    """root_rank's values of a list of traced arrays, as one call (one group)."""
    root_rank = validation.check_root_rank(root_rank)
    dtypes = [x.dtype for x in tensors]
    sent = [jax.lax.bitcast_convert_type(x, _AS_SIGNED[x.dtype]) if x.dtype in _AS_SIGNED else x for x in tensors]
    received = compiled.call(
        compiled.OP.BROADCAST,
        "broadcast",
        sent,
        [compiled.same_shape(x) for x in sent],
        name,
        root_rank=root_rank,
        set_id=process_set_id(process_set),
        elementwise=True,
    )
    return [jax.lax.bitcast_convert_type(r, d) if d in _AS_SIGNED else r for r, d in zip(received, dtypes)]


def alltoall(tensor, splits=None, name=None, received_splits=None, process_set=global_process_set):
    """Send splits[i] rows of `tensor` to rank i (equal shares without splits). Returns
    the received rows in rank order, and with splits given also the rows received
    from each rank (int32). Inside jit, splits must be concrete and received_splits
    given (the result's shape is fixed when tracing)."""
    tensor = jnp.asarray(tensor)
    if not _is_traced(tensor):
        result = _host.alltoall(
            _host_array(tensor),
            splits=None if splits is None else np.asarray(splits),
            name=name,
            process_set=process_set,
        )
        if splits is None:
            return jnp.asarray(result)
        return jnp.asarray(result[0]), jnp.asarray(result[1])
    set_id = process_set_id(process_set)
    set_size = compiled.rank_and_size(set_id)[1]
    if splits is not None and received_splits is None and device_arrays.on_gpu(tensor):
        received_splits = device_arrays.received_splits(splits, process_set)

    def exchange(x):
        sent, rows = compiled.alltoall_layout(x, splits, received_splits, set_id)
        out_types = [compiled.with_rows(x, rows)]
        if splits is not None:
            out_types.append(jax.ShapeDtypeStruct((set_size,), jnp.int64 if jax.config.jax_enable_x64 else jnp.int32))
        outputs = _alltoall_call(x, sent, out_types, name, set_id, set_size)
        return outputs[0] if splits is None else (outputs[0], outputs[1].astype(jnp.int32))

    return compiled.rows_vmappable(exchange, (True,) if splits is None else (True, False))(tensor)


def _alltoall_call(tensor, sent, out_types, name, set_id, set_size):
    if len(out_types) == 2 and out_types[1].dtype != jnp.int64:
        # The handler writes int64 splits; without x64 JAX has no int64 arrays, so the
        # splits come back in two int32 words each and are recombined here.
        raw = compiled.call(
            compiled.OP.ALLTOALL,
            "alltoall",
            [tensor],
            [out_types[0], jax.ShapeDtypeStruct((set_size, 2), jnp.int32)],
            name,
            splits=sent,
            set_id=set_id,
        )
        return raw[0], raw[1][:, 0]  # little-endian low words; row counts fit in 31 bits
    return compiled.call(compiled.OP.ALLTOALL, "alltoall", [tensor], out_types, name, splits=sent, set_id=set_id)


def reducescatter(
    tensor, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Reduce `tensor` over all ranks and give rank r the r-th block of rows (the first
    ranks get one extra row when the rows do not divide evenly)."""
    tensor = jnp.asarray(tensor)
    if not _is_traced(tensor):
        return jnp.asarray(
            _host.reducescatter(
                _host_array(tensor),
                name=name,
                op=op,
                prescale_factor=prescale_factor,
                postscale_factor=postscale_factor,
                process_set=process_set,
            )
        )
    set_id = process_set_id(process_set)

    def scatter(x):
        rows = compiled.reducescatter_rows(x, set_id)
        return compiled.call(
            compiled.OP.REDUCESCATTER,
            "reducescatter",
            [x],
            [compiled.with_rows(x, rows)],
            name,
            reduce_op=op,
            prescale=prescale_factor,
            postscale=postscale_factor,
            allowed_ops=ALLREDUCE_OPS,  # every op: which ones reducescatter takes is the core's check
            set_id=set_id,
        )[0]

    return compiled.rows_vmappable(scatter, (True,))(tensor)


def _eager_only(function, what):
    """`function` refusing to run while JAX traces: it would run once, at trace time,
    instead of in every execution of the compiled program."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if isinstance(jnp.zeros(()), jax.core.Tracer):  # constants are staged only while tracing
            raise RuntimeError(f"lockstep.jax.{what}() works eagerly only; call it outside jax.jit")
        return function(*args, **kwargs)

    return wrapper


barrier = _eager_only(_host.barrier, "barrier")
barrier.__doc__ = "Return once every rank has called barrier() (eager code only)."
broadcast_object = _eager_only(_host.broadcast_object, "broadcast_object")
allgather_object = _eager_only(_host.allgather_object, "allgather_object")
join = _eager_only(_host.join, "join")
