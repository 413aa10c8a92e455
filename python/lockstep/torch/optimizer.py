"""DistributedOptimizer: averages gradients across ranks before each step.

The returned object is an instance of a subclass of the wrapped optimizer's class
that shares the wrapped optimizer's parameter groups, options and state, so
learning-rate schedulers, state_dict() and isinstance checks keep working.
"""

import warnings
from contextlib import contextmanager

import torch

from lockstep import _core
from lockstep.common import basics, validation
from lockstep.common.buckets import bucket_bytes_from_environment
from lockstep.common.exceptions import OptimizerUsageError
from lockstep.common.ops import (
    Adasum,
    Average,
    Sum,
    check_linear_op,
    predivided_scaling,
    to_core_reduce_op,
)
from lockstep.common.process_sets import global_process_set, membership
from lockstep.torch.adasum_optimizer import adasum_optimizer
from lockstep.torch.compression import Compression
from lockstep.torch.gradient_reducer import GradientReducer, ReductionSettings
from lockstep.torch.parameter_names import gradient_buckets, resolve_groups, resolve_named_parameters

DOUBLE_SYNCHRONIZE_WARNING = (
    "optimizer.step() called without optimizer.skip_synchronize() context after optimizer.synchronize(). "
    "This can cause training slowdown. You may want to consider using optimizer.skip_synchronize() context "
    "if you use optimizer.synchronize() in your code."
)

# Instance attributes that bind the wrapped optimizer itself (an LR scheduler created
# on it wraps its `step`); copying them would bypass the gradient synchronization.
_BOUND_ATTRIBUTES = ("step", "zero_grad")


class _DistributedOptimizerMixin:
    def synchronize(self):
        """Wait for every gradient's allreduce; the gradients then hold the averages.

        Call it before inspecting or clipping gradients, then call step() inside
        skip_synchronize() so the gradients are not reduced a second time.
        """
        self._lockstep_reducer.synchronize()
        self._lockstep_synchronized = True

    def _lockstep_discard_step(self):
        """Forget the step in progress after it failed (elastic state.restore()): the
        allreduces it started are waited out and their errors dropped."""
        self._lockstep_reducer.discard()
        self._lockstep_synchronized = False

    @contextmanager
    def skip_synchronize(self):
        """step() inside this context uses the gradients as synchronize() left them."""
        self._lockstep_should_synchronize = False
        try:
            yield
        finally:
            self._lockstep_should_synchronize = True

    def step(self, closure=None):
        if closure is not None:
            # The closure runs the backward pass, so each evaluation (LBFGS makes
            # several) must be followed by the synchronization.
            return super().step(self._synchronizing(closure))
        self._synchronize_before_step()
        return super().step()

    def _synchronizing(self, closure):
        def evaluate():
            loss = closure()
            self._synchronize_before_step()
            return loss

        return evaluate

    def _synchronize_before_step(self):
        if self._lockstep_should_synchronize:
            if self._lockstep_synchronized and not self._lockstep_warned_double_sync:
                # Horovod's wording, so log filters written for Horovod keep working;
                # once per optimizer, since a training loop would repeat it every step.
                self._lockstep_warned_double_sync = True
                warnings.warn(DOUBLE_SYNCHRONIZE_WARNING, stacklevel=3)
            self.synchronize()
        self._lockstep_synchronized = False

    def zero_grad(self, set_to_none=True):
        if self._lockstep_reducer.has_pending():
            raise OptimizerUsageError(
                "optimizer.zero_grad() was called after loss.backward() but before optimizer.step() or "
                "optimizer.synchronize(): the gradients' allreduces are still using them (after a backward pass "
                "that raised, call optimizer.step() or optimizer.synchronize() to complete the allreduces it started)"
            )
        return super().zero_grad(set_to_none=set_to_none)


def DistributedOptimizer(  # noqa: N802 - Horovod's name for this factory
    optimizer,
    named_parameters=None,
    compression=Compression.none,
    backward_passes_per_step=1,
    op=Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    sparse_as_dense=False,
    process_set=global_process_set,
):
    """Wrap `optimizer` so that step() applies gradients averaged (or summed) over all ranks.

    named_parameters: (name, parameter) pairs, e.g. model.named_parameters(); names
    must be unique and cover every parameter of the optimizer. They name each
    gradient's allreduce, which must match across ranks.
    gradient_predivide_factor: with op=Average, gradients are divided by this factor
    before the sum and by size/factor after it.
    groups: None, a number of groups to split the parameters into, or lists of
    parameters; each group is reduced as one fused unit (num_groups: Horovod's
    deprecated name for a number of groups). With None, each gradient is still its
    own allreduce, but they are handed to the core in buckets (reverse parameter
    order, 1 MiB first, then LOCKSTEP_GRADIENT_BUCKET_BYTES, 25 MiB by default), as
    torch DDP does; groups=0 hands each over the moment it is ready, as Horovod does.
    process_set: average over the ranks of this set only; every rank of the set must
    wrap its optimizer alike. On ranks outside the set, as in Horovod, the optimizer
    communicates nothing: step() applies the rank's own gradients.
    """
    basics.require_initialized()
    set_size, included = membership(process_set)
    if num_groups:
        warnings.warn("num_groups is deprecated (as in Horovod); pass groups=", DeprecationWarning, stacklevel=2)
        groups = num_groups if groups is None else groups
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if isinstance(optimizer, _DistributedOptimizerMixin):
        raise ValueError("optimizer is already a DistributedOptimizer; wrap the plain optimizer only once")
    passes = validation.as_int(backward_passes_per_step, "backward_passes_per_step")
    if passes < 1:
        raise ValueError(f"backward_passes_per_step must be at least 1, got {passes}")
    if _is_adasum(op):
        if process_set is not global_process_set:
            raise ValueError("the Adasum DistributedOptimizer runs on the global process set only")
        if basics.size() > 1:
            # Gradients accumulate locally until step(), which combines the updates.
            return _adasum_optimizer(optimizer, named_parameters, compression, gradient_predivide_factor)
        op = Sum  # one rank has nothing to combine with (no hooks are registered)
    settings = _reduction_settings(compression, op, gradient_predivide_factor, sparse_as_dense, process_set)
    named = resolve_named_parameters(optimizer.param_groups, named_parameters)
    trainable = [(name, param) for name, param in named if param.requires_grad]
    # Without groups (Horovod's default), gradients go to the core in buckets; groups=0
    # hands each over the moment it is ready, as Horovod does.
    buckets = gradient_buckets(trainable, bucket_bytes_from_environment()) if groups is None else []
    reducer = GradientReducer(trainable, settings, passes, resolve_groups(groups, trainable), buckets)
    distributed = _subclass_instance(optimizer)
    distributed._lockstep_reducer = reducer
    distributed._lockstep_synchronized = False
    distributed._lockstep_should_synchronize = True
    distributed._lockstep_warned_double_sync = False
    # Horovod's attribute, read by tools and scripts: parameter -> its allreduce name.
    distributed._parameter_names = {param: name for name, param in named}
    # One rank has nothing to average with, and a rank outside the set nobody to
    # average with; like Horovod, skip the hooks entirely.
    if set_size > 1 and included:
        reducer.register_hooks()
    return distributed


def _is_adasum(op):
    # Any form of the constant (int or core enum); bad values fail with their own message.
    return int(to_core_reduce_op(op)) == Adasum


def _adasum_optimizer(optimizer, named_parameters, compression, gradient_predivide_factor):
    """Horovod's Adasum optimizer: the ranks' updates, not gradients, are combined."""
    if gradient_predivide_factor != 1.0:
        raise ValueError("gradient_predivide_factor applies to op=Average only, not Adasum")
    compression = validation.check_compressor(compression) or Compression.none
    named = resolve_named_parameters(optimizer.param_groups, named_parameters)
    # Refused before any hook is installed, with the core's check of an Adasum allreduce.
    validation.check_op(_core.OpType.ALLREDUCE, reduce_op=_core.ReduceOp.ADASUM)
    distributed = adasum_optimizer(optimizer, named, compression)
    distributed._parameter_names = {param: name for name, param in named}
    return distributed


def _reduction_settings(compression, op, gradient_predivide_factor, sparse_as_dense, process_set):
    compression = validation.check_compressor(compression) or Compression.none
    op = check_linear_op(op, "DistributedOptimizer")
    prescale, postscale = predivided_scaling(op, gradient_predivide_factor)
    if not isinstance(sparse_as_dense, bool):
        raise TypeError(f"sparse_as_dense must be a bool, got {type(sparse_as_dense).__name__}")
    return ReductionSettings(compression, op, prescale, postscale, sparse_as_dense, process_set)


def _subclass_instance(optimizer):
    """An instance of a new subclass of optimizer's class sharing its attributes."""
    base = optimizer.__class__
    cls = type(base.__name__, (_DistributedOptimizerMixin, base), {"__module__": base.__module__})
    distributed = cls.__new__(cls)
    attributes = {key: value for key, value in optimizer.__dict__.items() if key not in _BOUND_ATTRIBUTES}
    distributed.__dict__.update(attributes)
    return distributed
