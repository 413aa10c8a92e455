"""Collectives on host numpy arrays, split into a start and a finish step.

`start(arrays)` hands the arrays to the core and returns the frontend handles as
an int64 array; `finish(handles)` waits for them and returns the result arrays.
Splitting the two is what lets TensorFlow run independent collectives of one
graph concurrently: every start can run before any finish blocks. The same
objects serve eager mode (called directly) and graphs (wrapped in
tf.numpy_function), so both paths share one implementation.

Each object is fixed when the op is built (names included) and is called again
on every execution of a graph, so it keeps no per-execution state.
"""

import numpy as np

from lockstep.common.process import DISPATCHER
from lockstep.numpy.arrays import array_from_result, as_array, new_output_like, tensor_ref


def finish(handles):
    """Wait for every handle and return the concatenated list of result arrays.

    Waits on all of them even after a failure, so none is left pending in the core.
    """
    outputs = []
    first_error = None
    for handle in np.asarray(handles).reshape(-1):
        try:
            outputs.extend(DISPATCHER.synchronize(int(handle)))
        except Exception as error:  # noqa: BLE001 - re-raised below, after the rest
            first_error = first_error or error
    if first_error is not None:
        raise first_error
    return outputs


def _handles(values):
    return np.asarray(values, dtype=np.int64)


def _member_name(base, index):
    return None if base is None else f"{base}.{index}"


class Allreduce:
    """Allreduce of one array, or of several negotiated and fused as one group."""

    def __init__(self, scaling, name, grouped):
        self.scaling = scaling
        self.name = name
        self.grouped = grouped

    def start(self, *arrays):
        arrays = [as_array(np.asarray(a), f"tensors[{i}]") for i, a in enumerate(arrays)]
        outputs = [new_output_like(array) for array in arrays]
        results = [output for output, _ in outputs]
        inputs = [tensor_ref(array) for array in arrays]
        output_refs = [ref for _, ref in outputs]
        if self.grouped:
            handle = DISPATCHER.grouped_allreduce(inputs, output_refs, self.scaling, self.name, lambda _: results)
        else:
            handle = DISPATCHER.allreduce(inputs[0], output_refs[0], self.scaling, self.name, lambda _: results)
        return _handles([handle])


class Broadcast:
    """Broadcast of each array from root_rank; members are in flight together."""

    def __init__(self, root_rank, name):
        self.root_rank = root_rank
        self.name = name

    def start(self, *arrays):
        handles = []
        for index, raw in enumerate(arrays):
            array = as_array(np.asarray(raw), f"tensors[{index}]")
            output, output_ref = new_output_like(array)
            name = self.name if len(arrays) == 1 else _member_name(self.name, index)
            handles.append(
                DISPATCHER.broadcast(tensor_ref(array), output_ref, self.root_rank, name, _returning(output))
            )
        return _handles(handles)


class Allgather:
    def __init__(self, name):
        self.name = name

    def start(self, array):
        array = as_array(np.asarray(array))
        return _handles([DISPATCHER.allgather(tensor_ref(array), self.name, _result_as(array.dtype))])


class Alltoall:
    """Finishes with two arrays: the received rows and the rows received per rank."""

    def __init__(self, name):
        self.name = name

    def start(self, array, splits=None):
        array = as_array(np.asarray(array))

        def finish_one(result):
            received_splits = np.asarray(result.received_splits, dtype=np.int32)
            return [array_from_result(result, array.dtype), received_splits]

        return _handles([DISPATCHER.alltoall(tensor_ref(array), splits, self.name, finish_one)])


class Reducescatter:
    def __init__(self, scaling, name):
        self.scaling = scaling
        self.name = name

    def start(self, array):
        array = as_array(np.asarray(array))
        handle = DISPATCHER.reducescatter(tensor_ref(array), self.scaling, self.name, _result_as(array.dtype))
        return _handles([handle])


class Barrier:
    """Finishes with one int32 scalar (0), so a graph has an output to depend on."""

    def start(self):
        return _handles([DISPATCHER.barrier()])


class Join:
    """Finishes with the last rank to join, as an int32 scalar."""

    def start(self):
        return _handles([DISPATCHER.join()])


def finish_barrier(handles):
    _completed(handles)
    return np.int32(0)


def finish_join(handles):
    (last_rank,) = _completed(handles)
    return np.int32(last_rank)


def _completed(handles):
    # Barrier and join results are plain values, not lists of arrays.
    results = []
    for handle in np.asarray(handles).reshape(-1):
        results.append(DISPATCHER.synchronize(int(handle)))
    return results


def _returning(output):
    return lambda _: [output]


def _result_as(dtype):
    return lambda result: [array_from_result(result, dtype)]
