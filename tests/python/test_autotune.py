"""LOCKSTEP_AUTOTUNE under mpirun: exact results while settings change, a CSV log of
every window, and the same final settings on every rank."""

import csv
import re

from mpi_harness import run_ranks

DONE = re.compile(r"\[lockstep rank (\d+)\] info: autotune done after (\d+) windows: (.*)")


def test_autotune_tunes_every_setting_and_agrees(num_ranks, tmp_path):
    log = tmp_path / "autotune.csv"
    run = run_ranks(
        "autotune_checks.py",
        num_ranks,
        timeout=240,
        env={
            "LOCKSTEP_AUTOTUNE": "1",
            "LOCKSTEP_AUTOTUNE_LOG": str(log),
            "LOCKSTEP_LOG_LEVEL": "info",
            "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
            "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "2",
        },
    )
    run.assert_all_ranks_passed(num_ranks)

    finals = {int(rank): (int(windows), settings) for rank, windows, settings in DONE.findall(run.stderr)}
    assert sorted(finals) == list(range(num_ranks)), run.describe()
    assert len(set(finals.values())) == 1, f"ranks ended with different settings: {finals}"

    with open(log) as stream:
        rows = list(csv.DictReader(stream))
    final = rows.pop()
    assert final["phase"] == "final" and final["seconds"] == "0", final
    phases = [row["phase"] for row in rows]
    assert phases[0] == "warmup"
    # Shared memory is available to a tuning job from 2 ranks on one host.
    for setting, candidates in (
        ("chunk_bytes", 4),
        ("fusion_threshold", 4),
        ("cycle_time_ms", 4),
        ("shm_allreduce", 2),
    ):
        assert phases.count(setting) == 2 * candidates, (setting, phases)
    windows, settings = next(iter(finals.values()))
    assert windows == len(rows) == 1 + 2 * 14
    assert all(float(row["seconds"]) > 0 and int(row["bytes"]) > 0 for row in rows)
    # The chosen settings are among the candidates and appear in the log.
    chosen = dict(item.split("=") for item in settings.split())
    assert chosen["chunk"] in {f"{n}B" for n in (262144, 1048576, 4194304, 16777216)}, settings
    assert chosen["chunk"] == final["chunk_bytes"] + "B"
    assert chosen["fusion_threshold"] == final["fusion_threshold_bytes"] + "B"
    assert chosen["shm_allreduce"] == {"1": "on", "0": "off"}[final["shm_allreduce"]]


def test_settings_the_user_chose_are_not_tuned(tmp_path):
    log = tmp_path / "autotune.csv"
    run = run_ranks(
        "autotune_checks.py",
        2,
        timeout=240,
        env={
            "LOCKSTEP_AUTOTUNE": "1",
            "LOCKSTEP_AUTOTUNE_LOG": str(log),
            "LOCKSTEP_CHUNK_BYTES": "524288",
            "LOCKSTEP_SHM_ALLREDUCE": "off",
            "LOCKSTEP_AUTOTUNE_WARMUP_SAMPLES": "0",
            "LOCKSTEP_AUTOTUNE_STEPS_PER_SAMPLE": "2",
        },
    )
    run.assert_all_ranks_passed(2)
    with open(log) as stream:
        rows = list(csv.DictReader(stream))
    assert {row["phase"] for row in rows} == {"fusion_threshold", "cycle_time_ms", "final"}
    assert {row["chunk_bytes"] for row in rows} == {"524288"}
    assert {row["shm_allreduce"] for row in rows} == {"0"}
