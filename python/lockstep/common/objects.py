"""broadcast_object / allgather_object on top of a frontend's byte collectives.

Objects travel as pickles. A frontend supplies two collectives on 1-D numpy uint8
arrays, so torch/TF frontends can reuse this (lockstep.numpy's own broadcast and
allgather qualify, since the bytes live in host memory anyway):
  broadcast_bytes(array, root_rank, name, process_set) -> array  (same length on every rank)
  allgather_bytes(array, name, process_set) -> array             (concatenation in rank order)
"""

import pickle

import numpy as np

from lockstep.common.process_sets import global_process_set, process_set_id

# Lengths travel as 8 little-endian bytes so only byte collectives are needed.
_LENGTH_DTYPE = np.dtype("<u8")


class ObjectCollectives:
    def __init__(self, broadcast_bytes, allgather_bytes, namer, get_rank):
        self._broadcast_bytes = broadcast_bytes
        self._allgather_bytes = allgather_bytes
        self._namer = namer
        self._get_rank = get_rank

    def broadcast_object(self, obj, root_rank=0, name=None, process_set=global_process_set):
        """Return root_rank's `obj` on every rank of the set (the root, a global rank,
        gets its own object back)."""
        name = self._namer.name_for("broadcast_object", name, process_set_id(process_set))
        is_root = self._get_rank() == root_rank
        payload = _to_bytes(obj) if is_root else np.empty(0, np.uint8)
        length = _encode_length(len(payload))
        length = self._broadcast_bytes(length, root_rank, f"{name}.length", process_set)
        if not is_root:
            payload = np.empty(_decode_lengths(length)[0], np.uint8)
        payload = self._broadcast_bytes(payload, root_rank, f"{name}.data", process_set)
        return obj if is_root else pickle.loads(payload.tobytes())

    def allgather_object(self, obj, name=None, process_set=global_process_set):
        """Return the list of every rank's `obj` (of the set), in rank order."""
        name = self._namer.name_for("allgather_object", name, process_set_id(process_set))
        payload = _to_bytes(obj)
        lengths = _decode_lengths(
            self._allgather_bytes(_encode_length(len(payload)), f"{name}.length", process_set))
        gathered = self._allgather_bytes(payload, f"{name}.data", process_set)
        ends = np.cumsum(lengths)
        starts = ends - lengths
        return [pickle.loads(gathered[start:end].tobytes()) for start, end in zip(starts, ends)]


def _to_bytes(obj):
    return np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)


def _encode_length(length):
    return np.array([length], dtype=_LENGTH_DTYPE).view(np.uint8)


def _decode_lengths(raw):
    return np.ascontiguousarray(raw).view(_LENGTH_DTYPE).astype(np.int64)
