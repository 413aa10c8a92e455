"""DistributedOptimizer(op=hvd.Adasum): combines the ranks' parameter updates, not
their gradients, as Horovod's Adasum optimizer does.

Each rank applies the wrapped optimizer to its own gradients, which moves every
parameter by a local update (delta); the deltas are combined across ranks with
Adasum and every rank sets parameter = value before the step + combined delta.
Adasum's coefficients adapt to how aligned the ranks' updates are, which is why it
combines updates (what the optimizer would apply) rather than raw gradients.
"""

import torch

from lockstep.common.exceptions import OptimizerUsageError
from lockstep.common.ops import Adasum
from lockstep.torch import mpi_ops


class _AdasumOptimizerMixin:
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params = self._lockstep_adasum_params
        with torch.no_grad():
            starts = [param.detach().clone() for _, param in params]
            super().step()
            pending = []
            for (name, param), start in zip(params, starts):
                delta = param.detach() - start
                compressed, context = self._lockstep_compression.compress(delta)
                handle = mpi_ops.allreduce_async_(compressed, name=f"adasum.{name}", op=Adasum)
                pending.append((param, start, handle, context))
            for param, start, handle, context in pending:
                combined = self._lockstep_compression.decompress(mpi_ops.synchronize(handle), context)
                param.copy_(start + combined)
        return loss

    def synchronize(self):
        """Nothing to wait for: the Adasum optimizer combines updates inside step()."""

    def skip_synchronize(self):
        raise OptimizerUsageError(
            "skip_synchronize() does not apply to the Adasum optimizer, which combines "
            "the ranks' updates inside step() rather than their gradients before it"
        )


def adasum_optimizer(optimizer, named, compression):
    """A subclass instance of optimizer's class, sharing its state, whose step()
    combines the ranks' updates with Adasum. `named`: (name, parameter) pairs."""
    base = optimizer.__class__
    cls = type(base.__name__, (_AdasumOptimizerMixin, base), {"__module__": base.__module__})
    distributed = cls.__new__(cls)
    distributed.__dict__.update({k: v for k, v in optimizer.__dict__.items() if k not in ("step", "zero_grad")})
    distributed._lockstep_adasum_params = [(name, param) for name, param in named if param.requires_grad]
    distributed._lockstep_compression = compression
    return distributed
