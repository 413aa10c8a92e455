"""Turns frontend tensors into core OpSpecs, enqueues them and completes handles.

Frontends convert their tensors to TensorRefs and say how to build their result
from the core's Result(s); everything else (argument checks that do not depend on
the framework, automatic names, keeping memory alive, waiting) happens here once.
"""

import threading
from typing import Any, NamedTuple, Tuple

from lockstep.common import basics, validation
from lockstep.common.handles import PendingOp
from lockstep.common.ops import Average, reduction_args


# NamedTuples rather than dataclasses: they are built on every op, and are several
# times cheaper to construct.
class TensorRef(NamedTuple):
    """A frontend tensor as the core sees it: C-contiguous memory at `address`."""

    address: int
    dtype: Any  # _core.DataType
    shape: Tuple[int, ...]
    owner: Any  # the object owning the memory, kept alive while the op is pending
    device: int = -1  # -1: host memory; >= 0: CUDA device ordinal
    # For device memory: the framework's CUDA stream (cudaStream_t as an int; 0 is the
    # legacy default stream) that produced the input and will consume the result. The
    # core waits on it before reading and makes it wait on lockstep's work in Wait().
    stream: int = 0


class Scaling(NamedTuple):
    """Reduce op and scale factors of a reduction, as the user passed them."""

    op: Any = Average
    prescale: Any = 1.0
    postscale: Any = 1.0


def _no_result(results):
    return None


class OpDispatcher:
    def __init__(self, core, namer, handles):
        self._core = core
        self._namer = namer
        self._handles = handles
        core.set_allreduce_checks(self._checked_allreduce_args, namer.name_for)
        # Set by a frontend with device tensors (torch): called with the core Results of
        # a synchronized op before its finish(), to order the stream that is current now
        # after lockstep's GPU work (wait() ordered only the stream the op was
        # submitted on). None: nothing to do.
        self.order_device_results = None
        # Per thread: how many run_now() calls are submitting (see there).
        self._caller_waits = threading.local()

    # Submission. Each returns a frontend handle for poll()/synchronize(); `finish`
    # receives the core Result (a list of them for groups) and builds the output.
    # `ps` is the process set's id (0: all ranks); root ranks stay global ranks.

    def allreduce(self, tensor, output, scaling, name, finish, ps=0):
        self._require_initialized()
        reduce_op, prescale, postscale = self._reduction_args(scaling, "allreduce")
        # One member tuple rather than an OpSpec: this runs once per gradient every step.
        name = self._name("allreduce", name, ps)
        member = (name, tensor.dtype, tensor.shape, tensor.address, output.address, tensor.device, tensor.stream)
        core_handles = self._core.submit_allreduces([member], reduce_op, prescale, postscale, ps)
        pending = PendingOp(
            core_handles=core_handles,
            finish=lambda results: finish(results[0]),
            keepalive=(tensor.owner, output.owner),
        )
        return self._handles.add(pending)

    def allreduce_batch(self, tensors, outputs, scaling, names, finish, ps=0, wake_background=True, grouped=False):
        """Allreduces, each under its own name, handed to the core in one call, so that
        they usually meet in one cycle and fuse (a DistributedOptimizer's bucket of
        gradients); `grouped`: negotiated as one unit, as grouped_allreduce. One handle
        for all; `finish` receives their core Results. wake_background False: the
        caller synchronizes soon and runs the cycle itself (lockstep.h, SubmitOptions)."""
        self._require_initialized()
        names = [self._name("allreduce", name, ps) for name in names]
        return self._allreduces(tensors, outputs, scaling, names, finish, ps, wake_background, grouped)

    def allreduce_in_place_batch(self, members, owners, scaling, ps=0, wake_background=True, grouped=False):
        """allreduce_batch for a frontend that builds the core's member tuples itself
        (see _submit_allreduces), each reducing a host tensor in place under a name it
        has checked once: a DistributedOptimizer's bucket of dense gradients, every step,
        where building TensorRefs and checking each name again cost several
        microseconds per gradient. `grouped`: negotiated as one unit (an explicit group
        of parameters). synchronize() returns None."""
        self._require_initialized()
        return self._submit_allreduces(members, owners, scaling, _no_result, ps, wake_background, grouped)

    def run_allreduce(self, dtype, shape, tensor, output, op, prescale, postscale, name, ps=0, device=-1, stream=0):
        """The synchronous allreduce, the latency-critical path, and every frontend's one
        door to it: the user's op, scale factors and name as given, no frontend handle,
        one call into the core, which decides whether the call is plain, has anything
        else checked by _checked_allreduce_args, and waits with the GIL released.
        `tensor` and `output` are addresses with `shape` (torch; device memory for
        device >= 0, `stream` the framework's, see TensorRef), or C-contiguous host
        arrays of core dtype `dtype`, `output` like `tensor` or `tensor` itself
        (numpy; `shape` None). The caller's references keep the memory alive."""
        try:
            self._core.run_allreduce(name, dtype, shape, tensor, output, op, prescale, postscale, ps, device, stream)
        except self._core.AbortedError:
            raise  # the collective itself failed (e.g. ranks stopped responding): keep its type
        except self._core.LockstepError:
            self._require_initialized()
            raise
        finally:
            # As _restart_names_if_idle, inline: two calls less per named op.
            if self._namer.counters and self._handles.idle():
                self._namer.restart()

    def _checked_allreduce_args(self, dtype, op, prescale, postscale, name, ps):
        """(core reduce op, prescale, postscale, name) of a synchronous allreduce whose
        arguments the core did not find plain (lockstep._core.run_allreduce calls this),
        converted as every other reduction's are (the core checks their values when it
        runs the op), or the error that says what is wrong."""
        self._require_initialized()
        reduce_op, prescale, postscale = self._reduction_args(Scaling(op, prescale, postscale), "allreduce")
        return reduce_op, prescale, postscale, self._name("allreduce", name, ps)

    def grouped_allreduce(self, tensors, outputs, scaling, name, finish, ps=0):
        """All members share one op, scaling and name prefix; they are negotiated as a unit."""
        self._require_initialized()
        if len(tensors) == 0:
            raise ValueError("grouped_allreduce needs at least one tensor")
        base = self._name("grouped_allreduce", name, ps)
        names = [f"{base}.{index}" for index in range(len(tensors))]
        return self._allreduces(tensors, outputs, scaling, names, finish, ps, grouped=True)

    def allgather(self, tensor, name, finish, ps=0):
        self._require_initialized()
        spec = self._tensor_spec(self._core.OpType.ALLGATHER, tensor, ps)
        spec.name = self._name("allgather", name, ps)
        return self._submit([spec], lambda results: finish(results[0]), (tensor.owner,))

    def broadcast(self, tensor, output, root_rank, name, finish, ps=0):
        self._require_initialized()
        spec = self._tensor_spec(self._core.OpType.BROADCAST, tensor, ps)
        spec.root_rank = validation.as_root_rank(root_rank)
        spec.output = output.address
        spec.name = self._name("broadcast", name, ps)
        return self._submit([spec], lambda results: finish(results[0]), (tensor.owner, output.owner))

    def alltoall(self, tensor, splits, name, finish, ps=0):
        self._require_initialized()
        spec = self._tensor_spec(self._core.OpType.ALLTOALL, tensor, ps)
        if splits is not None:
            spec.splits = validation.as_splits(splits)
        spec.name = self._name("alltoall", name, ps)
        return self._submit([spec], lambda results: finish(results[0]), (tensor.owner,))

    def reducescatter(self, tensor, scaling, name, finish, ps=0):
        self._require_initialized()
        spec = self._reduction_spec(self._core.OpType.REDUCESCATTER, tensor, scaling, ps)
        spec.name = self._name("reducescatter", name, ps)
        return self._submit([spec], lambda results: finish(results[0]), (tensor.owner,))

    def grouped_allgather(self, tensors, name, finish, ps=0):
        """Allgathers negotiated as a unit; `finish` gets one Result per tensor."""
        self._require_initialized()
        specs = self._group_specs(self._core.OpType.ALLGATHER, tensors, name, "grouped_allgather", ps)
        return self._submit(specs, finish, tuple(t.owner for t in tensors), grouped=True)

    def grouped_reducescatter(self, tensors, scaling, name, finish, ps=0):
        """Reducescatters negotiated as a unit, sharing one op and scaling."""
        self._require_initialized()
        specs = self._group_specs(self._core.OpType.REDUCESCATTER, tensors, name, "grouped_reducescatter", ps)
        reduction = self._reduction_args(scaling, "reducescatter")
        for spec in specs:
            spec.reduce_op, spec.prescale, spec.postscale = reduction
        return self._submit(specs, finish, tuple(t.owner for t in tensors), grouped=True)

    def barrier(self, ps=0):
        self._require_initialized()
        spec = self._core.OpSpec()
        spec.op = self._core.OpType.BARRIER
        spec.process_set_id = ps
        spec.name = self._name("barrier", None, ps)
        return self._submit([spec], lambda results: None, ())

    def join(self, device=-1, stream=0):
        """Returns a handle whose result is the last rank to join. `device` >= 0: the GPU
        (and its framework stream) on which this rank stands in with zeros for the GPU
        collectives the other ranks still run."""
        self._require_initialized()
        spec = self._core.OpSpec()
        spec.op = self._core.OpType.JOIN
        spec.name = self._name("join", None)
        if device >= 0:
            spec.device = device
            spec.stream = stream
        return self._submit([spec], self._finish_join, ())

    def combine(self, handles, finish):
        """One handle standing for several pending ops (e.g. a sparse allreduce's two
        allgathers), which it takes over: `finish` gets their results, in order."""
        parts = [self._handles.pop(handle) for handle in handles]
        counts = [len(part.core_handles) for part in parts]

        def finish_all(results):
            outputs, start = [], 0
            for part, count in zip(parts, counts):
                outputs.append(part.finish(results[start : start + count]))
                start += count
            return finish(outputs)

        core_handles = [core_handle for part in parts for core_handle in part.core_handles]
        keepalive = tuple(part.keepalive for part in parts)
        return self._handles.add(PendingOp(core_handles=core_handles, finish=finish_all, keepalive=keepalive))

    def run_now(self, start, *args, **kwargs):
        """A synchronous collective: start(*args, **kwargs) submits its op(s) and returns
        their handle, and this thread then waits for the result. Host-memory ops go to
        the core without waking its background thread: this thread runs the cycle itself
        in synchronize() (lockstep.h, SubmitOptions), sparing the hand-off to that thread
        and back, which made a synchronous broadcast, allgather or grouped allreduce
        several times slower than allreduce."""
        state = self._caller_waits
        state.depth = getattr(state, "depth", 0) + 1
        try:
            handle = start(*args, **kwargs)
        finally:
            state.depth -= 1
        return self.synchronize(handle)

    # Completion.

    def poll(self, handle):
        """True when synchronize(handle) would not block."""
        pending = self._handles.get(handle)
        return all(self._core.poll(core_handle) for core_handle in pending.core_handles)

    def synchronize(self, handle):
        """Wait for the op and return the frontend's result; raises LockstepError if it failed."""
        pending = self._handles.pop(handle)
        core_handles = pending.core_handles
        try:
            if len(core_handles) == 1:
                results = [self._core.wait(core_handles[0])]
            else:
                # Waits on every member even after a failure, so the core releases them
                # all, then raises the first failure.
                results = self._core.wait_all(core_handles)
        finally:
            self._restart_names_if_idle()
        if self.order_device_results is not None:
            self.order_device_results(results)
        return pending.finish(results)

    # Helpers.

    def _caller_will_wait(self, items):
        """True while run_now() submits on this thread and every item (TensorRef or
        OpSpec) is in host memory. Device ops always wake the background thread."""
        return getattr(self._caller_waits, "depth", 0) > 0 and all(item.device < 0 for item in items)

    def _require_initialized(self):
        if not self._core.is_initialized():
            raise basics.not_running_error()

    def _restart_names_if_idle(self):
        """After an op finished: with nothing left in flight, automatic names start over
        (see lockstep.common.naming)."""
        if self._handles.idle():
            self._namer.restart()

    def _name(self, kind, name, ps=0):
        return self._namer.name_for(kind, validation.check_name(name), ps)

    def _group_specs(self, op_type, tensors, name, kind, ps):
        if len(tensors) == 0:
            raise ValueError(f"{kind} needs at least one tensor")
        base = self._name(kind, name, ps)
        specs = []
        for index, tensor in enumerate(tensors):
            spec = self._tensor_spec(op_type, tensor, ps)
            spec.name = f"{base}.{index}"
            specs.append(spec)
        return specs

    def _tensor_spec(self, op_type, tensor, ps=0):
        spec = self._core.OpSpec()
        spec.op = op_type
        spec.process_set_id = ps
        spec.dtype = tensor.dtype
        spec.shape = list(tensor.shape)
        spec.input = tensor.address
        if tensor.device >= 0:
            spec.device = tensor.device
            spec.stream = tensor.stream
        return spec

    def _reduction_spec(self, op_type, tensor, scaling, ps):
        spec = self._tensor_spec(op_type, tensor, ps)
        spec.reduce_op, spec.prescale, spec.postscale = self._reduction_args(scaling, op_type.name.lower())
        return spec

    @staticmethod
    def _reduction_args(scaling, op_kind):
        """(core reduce op, prescale, postscale) in the core's types; the core checks
        them for the op, the dtype and the process set when the op is submitted."""
        return reduction_args(scaling.op, scaling.prescale, scaling.postscale, op_kind)

    def _allreduces(self, tensors, outputs, scaling, names, finish, ps, wake_background=True, grouped=False):
        """Allreduces sharing one op and scaling, in one call into the core."""
        members = [
            (name, t.dtype, t.shape, t.address, o.address, t.device, t.stream)
            for t, o, name in zip(tensors, outputs, names)
        ]
        if wake_background and self._caller_will_wait(tensors):
            wake_background = False
        owners = tuple(t.owner for t in tensors) + tuple(o.owner for o in outputs)
        return self._submit_allreduces(members, owners, scaling, finish, ps, wake_background, grouped)

    def _submit_allreduces(self, members, owners, scaling, finish, ps, wake_background, grouped):
        """members: the core's (name, dtype, shape, input address, output address,
        device, stream) per allreduce; owners: what keeps their memory alive."""
        reduce_op, prescale, postscale = self._reduction_args(scaling, "allreduce")
        core_handles = self._core.submit_allreduces(
            members, reduce_op, prescale, postscale, ps, wake_background, grouped
        )
        return self._handles.add(PendingOp(core_handles=core_handles, finish=finish, keepalive=owners))

    def _submit(self, specs, finish, owners, grouped=False):
        core_handles = self._core.submit(specs, grouped, not self._caller_will_wait(specs))
        return self._handles.add(PendingOp(core_handles=core_handles, finish=finish, keepalive=owners))

    def _finish_join(self, results):
        return results[0].join_last_rank
