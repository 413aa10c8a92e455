"""lockstep.keras under mpirun with each Keras backend (TensorFlow, torch, JAX): DistributedOptimizer
equals one process on the whole batch, each callback's effect, checkpoint on
rank 0 and resume, and a shape mismatch failing fit() on every rank. With the JAX
backend the same launch also runs the Horovod parity checks (scripts/keras_parity.py,
at 2 ranks: test_keras_parity.py has the other runs), since starting Keras on every
rank costs more than the checks."""

import pytest
from mpi_harness import DESYNC_LIMIT, run_ranks

# Only JAX: TensorFlow names the collectives of a traced function after the graphs
# traced before it in the process, which differ between ranks once the frontend's
# checks ran (rank 0 alone saves checkpoints), so they no longer match.
PARITY_BACKENDS = ("jax",)


@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
def test_keras_frontend(backend, tmp_path):
    checkpoints, parity = tmp_path / "checkpoints", tmp_path / "parity"
    checkpoints.mkdir()
    parity.mkdir()
    args = [checkpoints, parity] if backend in PARITY_BACKENDS else [checkpoints]
    # The parity checks run many collectives per launch: a check that failed on one rank
    # fails the others quickly instead of leaving them waiting.
    env = {"KERAS_BACKEND": backend, **(DESYNC_LIMIT if backend in PARITY_BACKENDS else {})}
    run = run_ranks("keras_ranks.py", 2, timeout=300, env=env, args=args)
    run.assert_all_ranks_passed(2)
    saved = sorted(path.name for path in checkpoints.iterdir())
    assert saved == [f"checkpoint-{backend}.keras"], f"only rank 0 writes checkpoints, found {saved}"
    if backend in PARITY_BACKENDS:
        for rank in range(2):
            assert f"rank {rank}: Horovod parity checks passed" in run.stdout, run.describe()
