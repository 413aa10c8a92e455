"""broadcast_object / allgather_object on top of a frontend's byte collectives.

Objects travel as pickles. A frontend supplies two collectives on 1-D numpy uint8
arrays, so torch/TF frontends can reuse this (lockstep.common.host_ops' broadcast and
allgather qualify, since the bytes live in host memory anyway):
  broadcast_bytes(array, root_rank, name, process_set) -> array  (same length on every rank)
  allgather_bytes(array, name, process_set) -> array             (concatenation in rank order)
"""

import pickle

import numpy as np

from lockstep.common import validation
from lockstep.common.process_sets import global_process_set, process_set_id

# Lengths travel as 8 little-endian bytes so only byte collectives are needed.
_LENGTH_DTYPE = np.dtype("<u8")
# Sent instead of a length by a rank whose object cannot be pickled, so that the
# other ranks fail too instead of waiting for data that never comes.
_UNPICKLABLE = np.iinfo(np.int64).max


class ObjectCollectives:
    def __init__(self, broadcast_bytes, allgather_bytes, namer, get_rank):
        self._broadcast_bytes = broadcast_bytes
        self._allgather_bytes = allgather_bytes
        self._namer = namer
        self._get_rank = get_rank

    def broadcast_object(self, obj, root_rank=0, name=None, process_set=global_process_set):
        """Return root_rank's `obj` on every rank of the set (the root, a global rank,
        gets its own object back)."""
        # Checked before anything is sent: a name that is not a str would become a
        # different tensor name on every rank, and the ranks would wait for each other.
        name = self._namer.name_for("broadcast_object", validation.check_name(name), process_set_id(process_set))
        root_rank = validation.as_int(root_rank, "root_rank")
        is_root = self._get_rank() == root_rank
        payload, failure = _to_bytes(obj) if is_root else (np.empty(0, np.uint8), None)
        length = _encode_length(_UNPICKLABLE if failure else len(payload))
        length = _decode_lengths(self._broadcast_bytes(length, root_rank, f"{name}.length", process_set))[0]
        if failure is not None:
            raise failure
        if length == _UNPICKLABLE:
            raise ValueError(f"broadcast_object '{name}': the root rank {root_rank} could not pickle its object")
        if not is_root:
            payload = np.empty(length, np.uint8)
        payload = self._broadcast_bytes(payload, root_rank, f"{name}.data", process_set)
        return obj if is_root else pickle.loads(payload.tobytes())

    def allgather_object(self, obj, name=None, process_set=global_process_set):
        """Return the list of every rank's `obj` (of the set), in rank order."""
        name = self._namer.name_for("allgather_object", validation.check_name(name), process_set_id(process_set))
        payload, failure = _to_bytes(obj)
        length = _encode_length(_UNPICKLABLE if failure else len(payload))
        lengths = _decode_lengths(self._allgather_bytes(length, f"{name}.length", process_set))
        if failure is not None:
            raise failure
        failed = [rank for rank, length in enumerate(lengths) if length == _UNPICKLABLE]
        if failed:
            raise ValueError(f"allgather_object '{name}': rank(s) {failed} could not pickle their objects")
        gathered = self._allgather_bytes(payload, f"{name}.data", process_set)
        ends = np.cumsum(lengths)
        starts = ends - lengths
        return [pickle.loads(gathered[start:end].tobytes()) for start, end in zip(starts, ends)]


def _to_bytes(obj):
    """(the pickle as uint8 array, None), or (None, the error) if obj cannot be pickled."""
    try:
        return np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8), None
    except Exception as error:  # noqa: BLE001 - any pickling failure; re-raised after telling the peers
        return None, error


def _encode_length(length):
    return np.array([length], dtype=_LENGTH_DTYPE).view(np.uint8)


def _decode_lengths(raw):
    return np.ascontiguousarray(raw).view(_LENGTH_DTYPE).astype(np.int64)
