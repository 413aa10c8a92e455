"""Elastic training for lockstep.torch, as Horovod's `hvd.elastic`:

    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        ...
        state.commit()

Run it with `lockstep-run -np 4 --min-np 2 --host-discovery-script discover.sh python train.py`.
"""

from lockstep.common.elastic import HorovodInternalError, HostsUpdatedInterrupt, ObjectState, State, run_fn
from lockstep.torch.elastic.sampler import ElasticSampler
from lockstep.torch.elastic.state import TorchState
from lockstep.torch.objects import allgather_object


def run(func):
    """Decorator: `func(state, ...)` runs until done, resuming from the last commit
    after a lost peer or a change of hosts (see lockstep.common.elastic.runner)."""
    return run_fn(func, allgather_object)


__all__ = [
    "ElasticSampler",
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
    "ObjectState",
    "State",
    "TorchState",
    "run",
]
