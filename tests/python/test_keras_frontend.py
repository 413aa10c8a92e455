"""lockstep.keras under mpirun with each Keras backend (TensorFlow, torch, JAX): DistributedOptimizer
equals one process on the whole batch, each callback's effect, checkpoint on
rank 0 and resume, and a shape mismatch failing fit() on every rank."""

import pytest
from mpi_harness import run_ranks


@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
def test_keras_frontend(backend, tmp_path):
    run = run_ranks("keras_ranks.py", 2, timeout=240, env={"KERAS_BACKEND": backend}, args=[tmp_path])
    run.assert_all_ranks_passed(2)
    saved = sorted(path.name for path in tmp_path.iterdir())
    assert saved == [f"checkpoint-{backend}.keras"], f"only rank 0 writes checkpoints, found {saved}"
