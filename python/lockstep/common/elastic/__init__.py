"""Elastic training shared by the frontends: Horovod's State/ObjectState, its
exceptions, and the `run` loop that resumes from committed state after a restart by
lockstep-run's elastic supervisor."""

from lockstep.common.elastic.errors import HorovodInternalError, HostsUpdatedInterrupt
from lockstep.common.elastic.runner import run_fn
from lockstep.common.elastic.state import ObjectState, State

__all__ = ["HorovodInternalError", "HostsUpdatedInterrupt", "ObjectState", "State", "run_fn"]
