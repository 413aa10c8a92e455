"""lockstep.keras under mpirun with each Keras backend (TensorFlow, torch, JAX): DistributedOptimizer
equals one process on the whole batch, each callback's effect, checkpoint on
rank 0 and resume, and a shape mismatch failing fit() on every rank. With the JAX
backend the same launch also runs the Horovod parity checks (scripts/keras_parity.py,
at 2 ranks: test_keras_parity.py has the other runs), since starting Keras on every
rank costs more than the checks."""

import pytest
from mpi_harness import DESYNC_LIMIT

# Only JAX: TensorFlow names the collectives of a traced function after the graphs
# traced before it in the process, which differ between ranks once the frontend's
# checks ran (rank 0 alone saves checkpoints), so they no longer match.
PARITY_BACKENDS = ("jax",)


@pytest.mark.rank_checks("keras_ranks.py")
@pytest.mark.parametrize("backend", sorted({"tensorflow", "torch", "jax"} - set(PARITY_BACKENDS)))
def test_keras_frontend(backend, rank_check):
    run_keras_ranks(backend, rank_check, parity=False)


# The parity checks of TensorFlow's backend only do not run on these.
@pytest.mark.rank_checks("keras_ranks.py", "keras_parity.py", without=["sync_batch_norm", "partial_tape"])
@pytest.mark.parametrize("backend", PARITY_BACKENDS)
def test_keras_frontend_and_parity(backend, rank_check):
    run_keras_ranks(backend, rank_check, parity=True)


def run_keras_ranks(backend, rank_check, parity):
    checkpoints, parity_models = rank_check.tmp_path / "checkpoints", rank_check.tmp_path / "parity"
    checkpoints.mkdir(exist_ok=True)
    parity_models.mkdir(exist_ok=True)
    args = [checkpoints, parity_models] if parity else [checkpoints]
    # The parity checks run many collectives per launch: a check that failed on one rank
    # fails the others quickly instead of leaving them waiting.
    env = {"KERAS_BACKEND": backend, **(DESYNC_LIMIT if parity else {})}
    run = rank_check.run(2, timeout=300, env=env, args=args)
    if rank_check.name == "checkpoint_on_rank_zero_and_resume":
        saved = sorted(path.name for path in checkpoints.iterdir())
        assert saved == [f"checkpoint-{backend}.keras"], f"only rank 0 writes checkpoints, found {saved}"
    return run
