"""Negotiation's payload lane under mpirun at 2 and 3 ranks: the same script with the
lane (LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES=64, the default) and without (0) gives the
same bits for every case, and rank 0's timeline shows exactly the expected cases
riding (ALLREDUCE_IN_NEGOTIATION) with the lane and none without it."""

import json
import pickle
import sys
from pathlib import Path

from mpi_harness import run_ranks

sys.path.insert(0, str(Path(__file__).resolve().parent / "scripts"))
from timeline_checks import read_timeline  # noqa: E402

RIDING = "ALLREDUCE_IN_NEGOTIATION"


def run_lane(ranks, lane_bytes, out_dir):
    out_dir.mkdir()
    timeline = out_dir / "timeline.json"
    env = {"LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES": str(lane_bytes), "LOCKSTEP_TIMELINE": str(timeline)}
    run = run_ranks("payload_lane.py", ranks, env=env, args=[str(out_dir)])
    run.assert_all_ranks_passed(ranks)
    results = []
    for rank in range(ranks):
        with open(out_dir / f"results.{rank}.pickle", "rb") as stream:
            results.append(pickle.load(stream))
    expected = set(json.loads((out_dir / "expected_rides.json").read_text()))
    events = read_timeline(timeline)
    tracks = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    rode = {tracks[e["tid"]] for e in events if e.get("ph") == "B" and e.get("name") == RIDING}
    return results, expected, rode


def test_riding_gives_the_data_paths_bits(num_ranks, tmp_path):
    with_lane, expected, rode = run_lane(num_ranks, 64, tmp_path / "lane")
    without, expected_off, rode_off = run_lane(num_ranks, 0, tmp_path / "off")
    assert expected, "no case was expected to ride: the test would prove nothing"
    assert rode_off == set() and expected_off == set(), sorted(rode_off)
    cases = set(with_lane[0])  # the cases whose riding is predictable; the others are timing
    assert rode & cases == expected, (
        f"rode but not expected: {sorted((rode & cases) - expected)}; "
        f"expected but did not ride: {sorted(expected - rode)}"
    )
    assert "lane.late" in rode and "lane.nan_sum" not in rode and "lane.zero_max" not in rode
    for rank in range(num_ranks):
        assert with_lane[rank].keys() == without[rank].keys()
        differ = [name for name in with_lane[rank] if with_lane[rank][name] != without[rank][name]]
        assert not differ, f"rank {rank}: with and without the lane differ on {differ}"
