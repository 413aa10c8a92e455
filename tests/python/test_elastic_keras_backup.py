"""Keras' own BackupAndRestore with lockstep's callbacks: a 2-rank job killed in epoch 2
and started again by hand resumes at epoch 2 on every rank (rank 0 alone keeps the
backup and BroadcastInitialEpochCallback tells the others), and ends with the weights
of a run that was never interrupted."""

import json
import re

import mpi_harness

SCRIPT = "keras_backup_restore.py"


def weights(run, rank):
    found = re.search(rf"rank {rank}: weights (\[.*\])", run.stdout)
    assert found, run.describe()
    return json.loads(found.group(1))


def test_killed_job_resumes_at_the_backed_up_epoch_on_every_rank(tmp_path, built_extension):
    backup = tmp_path / "backup"
    killed = mpi_harness.run_ranks(SCRIPT, 2, timeout=180, args=[backup, 2])
    assert not killed.timed_out and killed.returncode != 0, killed.describe()
    assert "rank 1: epoch 2" in killed.stdout and "weights" not in killed.stdout, killed.describe()

    resumed = mpi_harness.run_ranks(SCRIPT, 2, timeout=180, args=[backup])
    assert resumed.returncode == 0, resumed.describe()
    for rank in (0, 1):
        epochs = re.findall(rf"rank {rank}: epoch (\d+)", resumed.stdout)
        assert epochs == ["2", "3"], resumed.describe()
    assert weights(resumed, 0) == weights(resumed, 1), resumed.describe()

    whole = mpi_harness.run_ranks(SCRIPT, 2, timeout=180, args=[tmp_path / "other"])
    assert whole.returncode == 0, whole.describe()
    assert re.findall(r"rank 0: epoch (\d+)", whole.stdout) == ["0", "1", "2", "3"], whole.describe()
    for got, want in zip(weights(resumed, 0), weights(whole, 0)):
        assert abs(got - want) <= 1e-5 * max(1.0, abs(want)), (weights(resumed, 0), weights(whole, 0))
