"""TorchState: Horovod's elastic state for a torch model, optimizer, LR scheduler and
ElasticSampler, plus any picklable values given as keyword arguments.

Each tracked object has a handler that saves a deep copy of its state_dict (what
restore() and a restarted job come back to) and syncs it from one rank.
"""

import copy

import torch

from lockstep.common.basics import rank
from lockstep.common.elastic.state import ObjectState
from lockstep.torch.elastic.sampler import ElasticSampler
from lockstep.torch.objects import broadcast_object
from lockstep.torch.state_broadcast import broadcast_optimizer_state, broadcast_parameters


def copy_state(state):
    """A deep copy of a state_dict: what copy.deepcopy makes, the tensors cloned
    directly. deepcopy's own path for each tensor took 35 ms for ResNet-50 and its
    momentum buffers against 22 ms for clone() alone (benchmarks/studies/bench_elastic.py),
    and a commit of Horovod's MNIST example makes one each batch. Tensors that
    deepcopy treats specially (a subclass, one that requires grad, not strided) keep
    its path. A tensor held twice, or two tensors that view the same memory alike
    (a tied weight's entries in state_dict), are copied once, as deepcopy would."""
    clones, by_view = {}, {}
    pending = [state]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, (list, tuple)):
            pending.extend(value)
        elif (
            type(value) is torch.Tensor
            and id(value) not in clones
            and not value.requires_grad
            and value.layout == torch.strided
        ):
            view = (value.device, value.data_ptr(), value.dtype, value.shape, value.stride())
            if view not in by_view:
                by_view[view] = value.clone()
            clones[id(value)] = by_view[view]
    # deepcopy takes what its memo holds for an object as that object's copy.
    return copy.deepcopy(state, clones)


class StateHandler:
    """Keeps a saved copy of one object's state_dict."""

    def __init__(self, value):
        self.value = value
        self.saved = None
        self.save()

    def save(self):
        self.saved = copy_state(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self.saved)

    def sync(self, root_rank):
        self.value.load_state_dict(broadcast_object(self.value.state_dict(), root_rank=root_rank))

    def set_value(self, value):
        self.value = value
        self.save()


class ModelStateHandler(StateHandler):
    def sync(self, root_rank):
        broadcast_parameters(self.value.state_dict(), root_rank=root_rank)


class OptimizerStateHandler(StateHandler):
    def restore(self):
        # A DistributedOptimizer whose step failed still holds that step's allreduces.
        discard = getattr(self.value, "_lockstep_discard_step", None)
        if discard is not None:
            discard()
        super().restore()

    def sync(self, root_rank):
        broadcast_optimizer_state(self.value, root_rank=root_rank)


_HANDLERS = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (torch.optim.lr_scheduler.LRScheduler, StateHandler),
    (ElasticSampler, StateHandler),
]


def _handler_for(value):
    for kind, handler in _HANDLERS:
        if isinstance(value, kind):
            return handler(value)
    return None


class TorchState(ObjectState):
    """`TorchState(model, optimizer, sampler=..., epoch=0, batch=0)`: every argument
    becomes an attribute (`state.model`, `state.epoch`, ...) whose state commit()
    saves, restore() brings back and sync() sends from one rank to all."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers = {name: _handler_for(value) for name, value in kwargs.items()}
        self._handlers = {name: handler for name, handler in handlers.items() if handler is not None}
        for name, handler in self._handlers.items():
            object.__setattr__(self, name, handler.value)
        others = {name: value for name, value in kwargs.items() if name not in self._handlers}
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **others)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync(self._sync_root)
        super().sync()

    def reset(self):
        # A changed membership repartitions what is left of the epoch.
        for handler in self._handlers.values():
            if isinstance(handler.value, ElasticSampler):
                handler.value.reset()

    def snapshot(self):
        return {"handlers": {name: handler.saved for name, handler in self._handlers.items()}, **super().snapshot()}

    def load_snapshot(self, snapshot):
        for name, saved in snapshot["handlers"].items():
            self._handlers[name].saved = saved
            self._handlers[name].restore()
        super().load_snapshot(snapshot)

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handlers[name].set_value(value)
        super().__setattr__(name, value)
