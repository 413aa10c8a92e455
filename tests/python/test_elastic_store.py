"""The elastic commit store and the choice of the commit to resume from, in one
process: commits named (generation, number) with the newer generation winning,
files signed with the job's key and opened without following links, free space
checked before writing, and a resumed commit put on file on every host."""

import collections
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from lockstep.common.elastic import runner
from lockstep.common.elastic import store as store_module
from lockstep.common.elastic.state import ObjectState
from lockstep.common.elastic.store import CommitStore, CommitStoreError

KEY = bytes(range(32))


def store(tmp_path, host="node1", generation=0, key=KEY):
    return CommitStore(str(tmp_path / "commits"), "job", key, host=host, generation=generation)


def write(commits, number, snapshot, generation=None):
    commits.write_async(number, snapshot, generation=generation)
    commits.flush()


def test_the_newer_generation_wins_over_a_higher_number(tmp_path):
    # node3 was cut off in generation 1 holding commit 5; generation 2 made its own 5.
    stale, current = store(tmp_path, "node3", generation=1), store(tmp_path, "node1", generation=2)
    write(stale, 5, {"from": "cut off"})
    write(current, 4, {"from": "resumed"}, generation=1)
    write(current, 5, {"from": "current"})
    assert stale.newest() == (1, 5) and current.newest() == (2, 5)
    held = [stale.newest(), None, current.newest()]  # the ranks' answers, as allgathered
    best = runner.newest_commit(held)
    assert best == (2, 5) and held.index(best) == 2
    assert current.load(best) == {"from": "current"}
    assert runner.newest_commit([None, None]) is None


def test_two_commits_are_kept_in_order_of_generation_then_number(tmp_path):
    commits = store(tmp_path, generation=3)
    write(commits, 9, "a", generation=2)
    write(commits, 1, "b")
    write(commits, 2, "c")
    assert commits.commit_ids() == [(3, 1), (3, 2)]


def test_a_planted_or_renamed_file_is_refused_before_unpickling(tmp_path):
    commits = store(tmp_path)
    write(commits, 1, {"weights": [1.0]})
    # A file written with another key (another job, or someone else) is refused.
    other = store(tmp_path, host="node1", key=bytes(32))
    with pytest.raises(CommitStoreError, match="not signed with this job's key"):
        other.load((0, 1))
    # A valid file renamed to a newer commit is refused: the name is signed too.
    os.rename(commits._path((0, 1)), commits._path((0, 7)))
    with pytest.raises(CommitStoreError, match="not signed"):
        commits.load((0, 7))

    marker = tmp_path / "planted"

    class Planted:  # what an unsigned pickle could run on load
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    with open(commits._path((0, 8)), "wb") as file:
        file.write(store_module._MAGIC + bytes(32) + pickle.dumps(Planted()))
    with pytest.raises(CommitStoreError, match="not signed"):
        commits.load((0, 8))
    assert not marker.exists()


def test_links_are_not_followed(tmp_path):
    commits = store(tmp_path)
    target = tmp_path / "elsewhere.pkl"
    target.write_bytes(b"x")
    os.symlink(target, commits._path((0, 3)))
    with pytest.raises(CommitStoreError, match="links are not followed"):
        commits.load((0, 3))
    # Writing through a planted link at the temporary name fails instead of writing there.
    os.symlink(target, commits._path((0, 4)) + f".{os.getpid()}.tmp")
    commits.write_async(4, "state")
    with pytest.raises(CommitStoreError):
        commits.flush()
    assert target.read_bytes() == b"x"


def test_a_commit_that_does_not_fit_says_how_much_it_needs(tmp_path, monkeypatch):
    commits = store(tmp_path)
    real = os.statvfs(commits.directory)
    Small = collections.namedtuple("Small", "f_bavail f_frsize")
    monkeypatch.setattr(os, "statvfs", lambda path: Small(f_bavail=256, f_frsize=real.f_frsize))
    commits.write_async(1, bytes(4 << 20))
    with pytest.raises(CommitStoreError, match=r"needs 4\.0 MiB but .* MiB free .*LOCKSTEP_ELASTIC_COMMIT_DIR"):
        commits.flush()
    assert commits.commit_ids() == []


def test_a_store_without_the_jobs_key_is_refused(tmp_path):
    with pytest.raises(CommitStoreError, match="no key"):
        store(tmp_path, key=b"")


def test_the_resumed_commit_is_saved_and_put_on_file_on_a_host_without_it(tmp_path):
    # A host that joined holds no commit: after the sync it writes the synced state,
    # so the loss of the one holder before the next commit loses nothing; and
    # restore() comes back to the synced state, not to the initial one.
    state = ObjectState(bcast_object=lambda value, root_rank=0: value, get_rank=lambda: 0, epoch=0)
    joined = store(tmp_path, "node3", generation=4)
    state._store = joined
    state.epoch = 7  # what the sync brought
    runner._spread(state, joined, (3, 12))
    joined.flush()
    assert joined.commit_ids() == [(3, 12)] and joined.load((3, 12)) == {"objects": {"epoch": 7}}
    state.epoch = 8
    state.restore()
    assert state.epoch == 7


def test_arrays_go_out_of_band_signed_and_come_back_writable(tmp_path):
    commits = store(tmp_path)
    weights = np.arange(1 << 18, dtype=np.float32)
    snapshot = {"weights": weights, "strided": weights[::2], "objects": {"epoch": 3, "name": "w"}}
    write(commits, 1, snapshot)
    data = open(commits._path((0, 1)), "rb").read()
    sections = store_module._split_sections(memoryview(data))
    # The pickle holds no array's bytes (a strided view's are copied in band, as numpy does).
    assert sections[1].nbytes < weights[::2].nbytes + 4096 and sections[2].nbytes == weights.nbytes
    loaded = commits.load((0, 1))
    np.testing.assert_array_equal(loaded["weights"], weights)
    np.testing.assert_array_equal(loaded["strided"], weights[::2])
    assert loaded["objects"] == {"epoch": 3, "name": "w"} and loaded["weights"].flags.writeable
    # One changed byte of an array is refused, as one of the pickle is.
    tampered = bytearray(data)
    tampered[-1] ^= 1
    with open(commits._path((0, 2)), "wb") as file:
        file.write(tampered)
    with pytest.raises(CommitStoreError, match="not signed"):
        commits.load((0, 2))


def test_tensors_go_out_of_band_and_come_back_as_tensors(tmp_path):
    # In a child process: torch stays out of pytest's.
    code = f"""
import warnings
import torch
from lockstep.common.elastic.store import CommitStore, _split_sections
commits = CommitStore({str(tmp_path / "commits")!r}, "job", bytes(range(32)), host="node1")
big = torch.arange(1 << 18, dtype=torch.float32)
state = {{
    "big": big,
    "steps": torch.tensor(7, dtype=torch.int64),
    "half": torch.ones(3, dtype=torch.bfloat16),      # no numpy dtype: pickled by torch
    "transposed": torch.arange(6.0).reshape(2, 3).t(),
    "grad": torch.ones(2, requires_grad=True),
}}
commits.write_async(1, state)
commits.flush()
with open(commits._path((0, 1)), "rb") as file:
    sections = _split_sections(memoryview(file.read()))
assert any(section.nbytes == big.numel() * 4 for section in sections[2:]), [s.nbytes for s in sections]
with warnings.catch_warnings():
    warnings.simplefilter("error")  # torch warns when it wraps a read-only buffer
    loaded = commits.load((0, 1))
for name, tensor in state.items():
    got = loaded[name]
    assert type(got) is torch.Tensor and got.dtype == tensor.dtype and got.shape == tensor.shape, name
    assert torch.equal(got.detach(), tensor.detach()), name
assert loaded["grad"].requires_grad
loaded["big"] += 1
print("ok")
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
