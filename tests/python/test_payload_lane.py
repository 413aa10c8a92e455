"""Negotiation's payload lane under mpirun at 2 and 3 ranks: the same script with the
lane (LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES=64, the default) and without (0) gives the
same bits for every case, and rank 0's timeline shows exactly the expected cases
riding (ALLREDUCE_IN_NEGOTIATION) with the lane and none without it. Each check of
the script is a test (scripts/checks.py) that must pass in both jobs, and its cases
must ride as expected and agree between them."""

import json
import pickle
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "scripts"))
from timeline_checks import read_timeline  # noqa: E402

RIDING = "ALLREDUCE_IN_NEGOTIATION"
# The checks whose cases (Cases.run) the test compares between the two jobs; the
# others check their results in the ranks only.
WITH_CASES = {"every_dtype_op_and_size", "fallbacks", "late_rank", "two_rank_set"}


def lane_job(rank_check, ranks, lane_bytes):
    out_dir = rank_check.tmp_path / f"lane-{lane_bytes}"
    out_dir.mkdir(exist_ok=True)
    timeline = out_dir / "timeline.json"
    env = {"LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES": str(lane_bytes), "LOCKSTEP_TIMELINE": str(timeline)}
    rank_check.run(ranks, env=env, args=[str(out_dir)])
    results = []
    for rank in range(ranks):
        with open(out_dir / f"results.{rank}.pickle", "rb") as stream:
            results.append(pickle.load(stream))
    expected = json.loads((out_dir / "expected_rides.json").read_text())
    events = read_timeline(timeline)
    tracks = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    rode = {tracks[e["tid"]] for e in events if e.get("ph") == "B" and e.get("name") == RIDING}
    return results, expected, rode


def riding_gives_the_data_paths_bits(rank_check, ranks):
    """Both jobs (with the lane and without); this test's check must pass in each."""
    with_lane, expected, rode = lane_job(rank_check, ranks, 64)
    without, expected_off, rode_off = lane_job(rank_check, ranks, 0)
    assert rode_off == set() and not any(expected_off.values()), sorted(rode_off)
    name = rank_check.name
    if name not in WITH_CASES:
        return
    cases = set(with_lane[0][name])  # the cases whose riding is predictable; the others are timing
    assert rode & cases == set(expected[name]), (
        f"rode but not expected: {sorted((rode & cases) - set(expected[name]))}; "
        f"expected but did not ride: {sorted(set(expected[name]) - rode)}"
    )
    if name == "every_dtype_op_and_size":
        assert expected[name], "no case was expected to ride: the test would prove nothing"
    if name == "fallbacks":
        assert "lane.nan_sum" not in rode and "lane.zero_max" not in rode, sorted(rode & cases)
    if name == "late_rank":
        assert "lane.late" in rode, sorted(rode)
    for rank in range(ranks):
        assert with_lane[rank][name].keys() == without[rank][name].keys()
        differ = [case for case in with_lane[rank][name] if with_lane[rank][name][case] != without[rank][name][case]]
        assert not differ, f"rank {rank}: with and without the lane differ on {differ}"


@pytest.mark.rank_checks("payload_lane.py", without=["two_rank_set"])  # a set of 2 inside a job of 3
def test_riding_gives_the_data_paths_bits_at_2_ranks(rank_check):
    riding_gives_the_data_paths_bits(rank_check, 2)


@pytest.mark.rank_checks("payload_lane.py")
def test_riding_gives_the_data_paths_bits_at_3_ranks(rank_check):
    riding_gives_the_data_paths_bits(rank_check, 3)
