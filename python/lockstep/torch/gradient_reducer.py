"""Allreduce of parameter gradients, started from backward-pass hooks.

A hook on each parameter fires once autograd has accumulated that parameter's
gradient. A parameter in a bucket (lockstep.common.buckets) waits for the rest of
its bucket, whose allreduces are then handed over together, while the rest of the
backward pass still runs; a parameter in no bucket or group is submitted at once; an
explicit group is reduced as one unit. With backward_passes_per_step = k, gradients
accumulate locally and only every k-th pass submits them. synchronize() submits
whatever the hooks did not (unused parameters, partial accumulations) and waits for
everything.
"""

import functools
import hashlib
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, List

import torch

from lockstep.common.dispatch import Scaling
from lockstep.common.exceptions import OptimizerUsageError
from lockstep.common.process import DISPATCHER
from lockstep.common.process_sets import process_set_id
from lockstep.torch import mpi_ops
from lockstep.torch.compression import Compression
from lockstep.torch.sparse import sparse_allreduce_async
from lockstep.torch.tensors import CORE_DTYPES

_STRIDED = torch.strided


@dataclass(frozen=True)
class ReductionSettings:
    compression: Any
    op: int
    prescale_factor: float
    postscale_factor: float
    sparse_as_dense: bool
    process_set: Any


class GradientReducer:
    def __init__(self, named_parameters, settings, backward_passes_per_step, groups, buckets=()):
        """named_parameters: (name, parameter) pairs to reduce; groups: lists of
        parameters reduced as one unit; buckets: lists of parameters (in no group)
        whose allreduces are submitted together once all are ready. Parameters in
        neither go alone."""
        self._names = {param: name for name, param in named_parameters}
        self._op_names = {param: f"allreduce.{name}" for name, param in named_parameters}
        self._params = [param for _, param in named_parameters]
        self._settings = settings
        self._passes_per_step = backward_passes_per_step
        self._groups = groups
        self._group_of = {param: index for index, group in enumerate(groups) for param in group}
        self._buckets = [list(bucket) for bucket in buckets]
        self._bucket_of = {param: index for index, bucket in enumerate(self._buckets) for param in bucket}
        # A bucket of dense CPU gradients without compression, the usual case, skips the
        # general path's per-tensor wrappers (_submit_dense_host_batch).
        self._plain_batches = settings.compression is Compression.none
        self._core_dtypes = {param: CORE_DTYPES.get(param.dtype) for param in self._params}
        self._scaling = Scaling(settings.op, settings.prescale_factor, settings.postscale_factor)
        self._hook_handles = []
        self._hook_lock = threading.Lock()
        self._active = False
        self._reset()

    def register_hooks(self):
        # The hooks hold the reducer weakly: a dropped optimizer stops reducing
        # instead of living on through its parameters.
        self._active = True
        reducer = weakref.ref(self)
        for param in self._params:
            self._hook_handles.append(param.register_hook(functools.partial(_before_accumulation, reducer, param)))
            self._hook_handles.append(param.register_post_accumulate_grad_hook(functools.partial(_ready, reducer)))

    def has_pending(self):
        """True between a backward pass and the synchronize() that consumes it."""
        return bool(self._touched or self._in_flight)

    def synchronize(self):
        """Submit every gradient not yet submitted this step, wait for all, store results."""
        if not self._active:
            return  # hooks never registered (a single rank): nothing to average with
        try:
            self._submit_remaining()
        finally:
            in_flight = self._in_flight
            self._reset()
            _complete_all(in_flight)

    def discard(self):
        """Forget the step in progress after it failed: wait out what is in flight,
        dropping its errors (lockstep stopped under it), so that the next backward
        pass starts afresh."""
        in_flight = self._in_flight
        self._reset()
        for complete in in_flight:
            try:
                complete()
            except Exception:  # noqa: BLE001, S110 - the step is being discarded
                pass

    def _submit_remaining(self):
        remaining = [p for p in self._params if p not in self._submitted and p not in self._group_of]
        if remaining:
            self._submit_batch(remaining)
        for index in range(len(self._groups)):
            if not self._groups_submitted[index]:
                self._submit_group(index)

    # Hooks.

    def check_pass_allowed(self, param):
        # Runs before autograd adds to param.grad, which an allreduce may be using.
        if self._remaining_passes[param] <= 0:
            raise OptimizerUsageError(
                f"the gradient of parameter '{self._names[param]}' was computed more than "
                f"backward_passes_per_step={self._passes_per_step} times before optimizer.step(); "
                "call step() (or synchronize()) after every backward_passes_per_step backward passes, "
                "or raise backward_passes_per_step to accumulate more gradients locally"
            )

    def on_gradient_ready(self, param):
        # Autograd runs the hooks of CPU and of CUDA parameters on different threads (one
        # per device), so a group's last two members can become ready at once.
        with self._hook_lock:
            self._touched.add(param)
            self._remaining_passes[param] -= 1
            if self._remaining_passes[param] > 0:
                return
            group = self._group_of.get(param)
            if group is None:
                bucket = self._bucket_of.get(param)
                if bucket is None:
                    self._submit_alone(param)
                    return
                ready = self._ready_in_bucket[bucket]
                ready.append(param)
                if len(ready) == len(self._buckets[bucket]):
                    self._submit_batch(ready)
                return
            self._ready_in_group[group].add(param)
            if len(self._ready_in_group[group]) == len(self._groups[group]):
                self._submit_group(group)

    # Submission.

    def _submit_alone(self, param):
        self._submitted.add(param)
        grad = self._dense_or_sparse_gradient(param)
        name = self._op_names[param]
        if grad.is_sparse:
            self._in_flight.append(self._submit_sparse(param, grad, name))
            return
        compressed, context = self._settings.compression.compress(grad)
        handle = mpi_ops.allreduce_async_(compressed, name=name, **self._reduction_arguments())
        self._in_flight.append(lambda: self._store(handle, [(param, context)]))

    def _submit_batch(self, params):
        """Each parameter's own allreduce, the dense ones handed over in one call."""
        if self._plain_batches and self._submit_dense_host_batch(params):
            return
        dense = []
        for param in params:
            self._submitted.add(param)
            grad = self._dense_or_sparse_gradient(param)
            if grad.is_sparse:
                self._in_flight.append(self._submit_sparse(param, grad, self._op_names[param]))
            else:
                dense.append((param, grad))
        if not dense:
            return
        compressed = [self._settings.compression.compress(grad) for _, grad in dense]
        handle = mpi_ops.batched_allreduce_async_(
            [tensor for tensor, _ in compressed],
            [self._op_names[param] for param, _ in dense],
            wake_background=not self._all_submitted(),
            **self._reduction_arguments(),
        )
        contexts = [(param, context) for (param, _), (_, context) in zip(dense, compressed)]
        self._in_flight.append(lambda: self._store_group(handle, contexts))

    def _submit_dense_host_batch(self, params, names=None, grouped=False):
        """_submit_batch (or, with the members' `names` and `grouped`, _submit_group) for
        gradients that are all dense, contiguous CPU tensors of a supported dtype, with
        no compression: the core's member tuples are built here directly and each
        gradient is reduced in place. The general path builds and checks a TensorRef
        for each and checks each name again: right after backward, with Python's caches
        cold, the benchmark convnet's 12 gradients took 231-235 us to submit that way
        and take 153-163 us this way. False, with nothing submitted, for anything else:
        the general path then handles it, or raises the error."""
        members = []
        gradients = []
        for position, param in enumerate(params):
            core_dtype = self._core_dtypes[param]
            # param.grad itself (a sparse_as_dense copy must go through the general path,
            # which writes the result back), or zeros for a parameter this rank did not use.
            grad = param.grad
            if grad is None:
                grad = self._dense_or_sparse_gradient(param)
            if core_dtype is None or not (grad.is_cpu and grad.layout is _STRIDED and grad.is_contiguous()):
                return False
            address = grad.data_ptr()
            name = self._op_names[param] if names is None else names[position]
            members.append((name, core_dtype, grad.shape, address, address, -1, 0))
            gradients.append(grad)
        self._submitted.update(params)
        handle = DISPATCHER.allreduce_in_place_batch(
            members,
            tuple(gradients),
            self._scaling,
            ps=process_set_id(self._settings.process_set),
            wake_background=not self._all_submitted(),
            grouped=grouped,
        )
        self._in_flight.append(lambda: mpi_ops.synchronize(handle))
        return True

    def _all_submitted(self):
        """After the last gradients of a backward pass: step() (synchronize) follows at
        once, and its thread runs the cycle for them itself. Waking the background
        thread instead would have it wait for the other ranks on a core the training
        thread uses, and hand the result back."""
        return len(self._submitted) == len(self._params)

    def _submit_group(self, index):
        params = self._groups[index]
        if self._plain_batches:
            base = self._group_name(index)
            names = [f"{base}.{member}" for member in range(len(params))]
            if self._submit_dense_host_batch(params, names, grouped=True):
                self._groups_submitted[index] = True
                return
        self._submitted.update(params)
        self._groups_submitted[index] = True
        grads = [self._dense_or_sparse_gradient(param) for param in params]
        sparse = [self._names[param] for param, grad in zip(params, grads) if grad.is_sparse]
        if sparse:
            raise ValueError(
                f"parameters {', '.join(sparse)} have sparse gradients and cannot be reduced in a group; "
                "pass sparse_as_dense=True or leave them out of groups"
            )
        compressed = [self._settings.compression.compress(grad) for grad in grads]
        base = self._group_name(index)
        handle = mpi_ops.batched_allreduce_async_(
            [tensor for tensor, _ in compressed],
            [f"{base}.{member}" for member in range(len(params))],
            wake_background=not self._all_submitted(),
            grouped=True,
            **self._reduction_arguments(),
        )
        contexts = [(param, context) for param, (_, context) in zip(params, compressed)]
        self._in_flight.append(lambda: self._store_group(handle, contexts))

    def _group_name(self, index):
        # The digest of the members' names and shapes keeps a group's name stable from
        # step to step but different for a different grouping (another optimizer), so
        # one name never stands for two different sets of tensors.
        members = ";".join(f"{self._names[p]}:{tuple(p.shape)}:{p.dtype}" for p in self._groups[index])
        return f"allreduce.group.{index}.{hashlib.sha1(members.encode()).hexdigest()[:12]}"

    def _submit_sparse(self, param, grad, name):
        """Sparse gradients are reduced as Horovod reduces them, by gathering every
        rank's entries (sparse_allreduce_async); a predivide factor cancels out."""
        handle = sparse_allreduce_async(
            grad.coalesce(), name=name, op=self._settings.op, process_set=self._settings.process_set
        )
        scale = self._settings.prescale_factor * self._settings.postscale_factor

        def complete():
            reduced = handle()
            param.grad = (reduced * scale if scale != 1.0 else reduced).coalesce()

        return complete

    def _dense_or_sparse_gradient(self, param):
        """The tensor to reduce for param: its gradient, or with sparse_as_dense a dense
        copy of a sparse one (the result goes back as a sparse gradient, as Horovod
        does, so optimizers that need sparse gradients, like SparseAdam, still work)."""
        # A parameter this rank did not use still takes part with zeros: another rank
        # may have used it, and every rank must submit the same tensors.
        if param.grad is None:
            param.grad = torch.zeros_like(param, memory_format=torch.preserve_format)
        elif param.grad.is_sparse and self._settings.sparse_as_dense:
            return param.grad.to_dense()
        return param.grad

    def _reduction_arguments(self):
        return {
            "op": self._settings.op,
            "prescale_factor": self._settings.prescale_factor,
            "postscale_factor": self._settings.postscale_factor,
            "process_set": self._settings.process_set,
        }

    # Completion.

    def _store(self, handle, contexts):
        self._store_reduced([mpi_ops.synchronize(handle)], contexts)

    def _store_group(self, handle, contexts):
        self._store_reduced(mpi_ops.synchronize(handle), contexts)

    def _store_reduced(self, reduced, contexts):
        for tensor, (param, context) in zip(reduced, contexts):
            result = self._settings.compression.decompress(tensor, context)
            if param.grad.is_sparse:  # reduced densely (sparse_as_dense)
                param.grad = result.to_sparse()
            elif result is not param.grad:
                with torch.no_grad():
                    param.grad.copy_(result)

    def _reset(self):
        self._remaining_passes = {param: self._passes_per_step for param in self._params}
        self._ready_in_group = [set() for _ in self._groups]
        self._ready_in_bucket = [[] for _ in self._buckets]
        self._groups_submitted = [False] * len(self._groups)
        self._submitted = set()
        self._touched = set()
        # Each entry waits for one submission and stores its reduced gradients.
        self._in_flight: List[Callable[[], None]] = []


def _complete_all(completions):
    """Run every completion, even after one fails, so no op is left pending; then
    raise the first failure."""
    first_error = None
    for complete in completions:
        try:
            complete()
        except Exception as error:  # noqa: BLE001 - re-raised below
            first_error = first_error or error
    if first_error is not None:
        raise first_error


def _before_accumulation(reducer_ref, param, grad):
    reducer = reducer_ref()
    if reducer is not None:
        reducer.check_pass_allowed(param)
    return None  # leaves the gradient unchanged


def _ready(reducer_ref, param):
    reducer = reducer_ref()
    if reducer is not None:
        reducer.on_gradient_ready(param)
