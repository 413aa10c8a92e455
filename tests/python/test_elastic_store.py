"""The elastic commit store and the choice of the commit to resume from, in one
process: commits named (generation, number) with the newer generation winning,
files signed with the job's key and opened without following links, free space
checked before writing, and a resumed commit put on file on every host."""

import collections
import os
import pickle

import pytest

from lockstep.common.elastic import runner
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
        file.write(b"lockstep-commit-1\n" + bytes(32) + pickle.dumps(Planted()))
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
