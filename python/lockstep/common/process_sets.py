"""Process sets: collectives among a subset of ranks, with Horovod's API.

    even = hvd.ProcessSet([0, 2])
    hvd.init(process_sets=[even])            # static: every rank passes the same list
    odd = hvd.add_process_set([1, 3])        # dynamic: collective over all ranks
    if even.included():
        hvd.allreduce(x, process_set=even)   # only ranks 0 and 2 take part

Each set has its own communicator and negotiation in the core, so ops on different
sets never wait for each other's ranks. Adding and removing sets is collective over
all ranks and needs no special mode (Horovod's HOROVOD_DYNAMIC_PROCESS_SETS):
changes ride on the ordinary negotiation of the global set and cost nothing while
none happens.
"""

from lockstep import _core
from lockstep.common.validation import as_int


class ProcessSet:
    """A set of global ranks. Its process_set_id is None until it is registered with
    init(process_sets=...) or add_process_set()."""

    def __init__(self, ranks):
        if isinstance(ranks, ProcessSet):
            ranks = ranks.ranks
        if not isinstance(ranks, (list, tuple, range)):
            raise TypeError(f"ranks must be a list of ints, got {type(ranks).__name__}")
        self.ranks = sorted(as_int(rank, "process set rank") for rank in ranks)
        self.process_set_id = None

    def size(self):
        """Number of ranks in the set (None while it is not registered)."""
        return None if self.process_set_id is None else len(self.ranks)

    def rank(self):
        """This process's rank within the set; -1 when it is not a member (None while
        the set is not registered)."""
        if self.process_set_id is None:
            return None
        me = _core.rank()
        return self.ranks.index(me) if me in self.ranks else -1

    def included(self):
        """Whether this process is a member (None while the set is not registered)."""
        if self.process_set_id is None:
            return None
        return _core.rank() in self.ranks

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0
# Sets registered since the core last started: a new start (after shutdown) knows
# none of them, so their ids are cleared then.
_registered = []


def setup_after_init(process_sets, fresh_start):
    """Called by init(): fill in the global set and register static sets in order."""
    global_process_set.ranks = list(range(_core.size()))
    if fresh_start:
        for process_set in _registered:
            process_set.process_set_id = None
        _registered.clear()
    if process_sets is None or process_sets == "dynamic":
        return
    if not isinstance(process_sets, (list, tuple)):
        raise TypeError('process_sets must be a list of ProcessSet objects (or "dynamic")')
    for process_set in process_sets:
        if process_set.process_set_id is None:  # init() again while running: already there
            add_process_set(process_set)


def add_process_set(process_set):
    """Register a new set (a ProcessSet or a list of ranks) on every rank and return it.

    Collective over all ranks: every rank calls it with the same ranks, in the same
    order. ValueError for bad ranks or a set that exists already.
    """
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError(f"{process_set} is registered already")
    process_set.process_set_id = _core.add_process_set(process_set.ranks)
    _registered.append(process_set)
    return process_set


def remove_process_set(process_set):
    """Unregister `process_set` on every rank (collective over all ranks). Ops still
    pending on it fail. Returns True; ValueError for the global or an unknown set."""
    set_id = process_set_id(process_set)
    _core.remove_process_set(set_id)
    process_set.process_set_id = None
    if process_set in _registered:
        _registered.remove(process_set)
    return True


def process_set_id(process_set):
    """The core id of `process_set`; ValueError unless it is registered."""
    if process_set is global_process_set:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"process_set must be a ProcessSet, got {type(process_set).__name__}")
    if process_set.process_set_id is None:
        raise ValueError(
            f"{process_set} is not registered: pass it to hvd.init(process_sets=[...]) or hvd.add_process_set()"
        )
    return process_set.process_set_id


def membership(process_set):
    """(the set's size, whether this rank is in it) for a registered set (None: the
    global set); ValueError unless it is registered. Gradient reducers use it: on a
    rank outside the set, Horovod communicates nothing and keeps the local gradients."""
    set_id = 0 if process_set is None else process_set_id(process_set)
    included = set_id == 0 or _core.rank() in _core.process_set_ranks(set_id)
    return process_set_size(set_id), included


def process_set_size(set_id):
    """Number of ranks of a registered set, from the core (which knows removals)."""
    return _core.size() if set_id == 0 else len(_core.process_set_ranks(set_id))
