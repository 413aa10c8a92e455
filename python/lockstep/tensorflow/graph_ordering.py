"""Control dependencies between the collectives of one function graph.

A collective in a graph is a start op (enqueue, returns at once) and a finish op
(blocks a TensorFlow thread in the core's wait). Two rules:

1. Deadlock freedom: every finish runs after every start created before it.
   A rank blocked in the finish of collective i has then enqueued collectives
   1..i, so the lowest-numbered collective anyone waits for has been enqueued on
   every rank and completes, however few inter-op threads there are.
2. Fusion: a finish also runs after the starts created later that do not need
   its result. Otherwise the executor tends to run each finish right after its
   start and block its threads while later independent starts wait, and the
   core would see the collectives one at a time instead of fusing them.
"""

import weakref

_COLLECTIVES_BY_GRAPH = weakref.WeakKeyDictionary()


class GraphCollectives:
    """The start and finish ops built so far in one graph, in creation order."""

    def __init__(self):
        self.starts = []
        self.finishes = []

    def add_start(self, start_op):
        """Record a start; earlier finishes that it does not depend on wait for it."""
        upstream = _ancestors(start_op)
        for finish_op in self.finishes:
            if finish_op not in upstream:  # else the edge would close a cycle
                # The public API only adds control inputs to ops being created.
                finish_op._add_control_input(start_op)  # noqa: SLF001
        self.starts.append(start_op)

    def add_finish(self, finish_op):
        self.finishes.append(finish_op)


def collectives_of(graph):
    collectives = _COLLECTIVES_BY_GRAPH.get(graph)
    if collectives is None:
        collectives = _COLLECTIVES_BY_GRAPH[graph] = GraphCollectives()
    return collectives


def _ancestors(op):
    """Every op `op` depends on through data or control inputs in its graph."""
    seen = set()
    pending = [op]
    while pending:
        current = pending.pop()
        for parent in [tensor.op for tensor in current.inputs] + list(current.control_inputs):
            if parent not in seen:
                seen.add(parent)
                pending.append(parent)
    return seen
