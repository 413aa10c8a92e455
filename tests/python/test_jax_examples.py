"""The JAX examples on 2 ranks, kept short with a training subset: each trains and
ends with identical parameters on every rank. (`make demo FRAMEWORK=jax` runs the
Keras one in full.)"""

import pytest
from mpi_harness import REPO_ROOT, run_ranks


@pytest.mark.parametrize(
    "example, identical",
    [
        ("jax_fashion_mnist.py", "weights identical on all ranks"),
        ("jax_optax_mlp.py", "parameters identical on all ranks"),
    ],
)
def test_jax_example_trains_identically_on_every_rank(example, identical):
    run = run_ranks(
        REPO_ROOT / "examples" / example, 2, timeout=240, args=["--train-examples", "2048", "--epochs", "2"]
    )
    assert not run.timed_out and run.returncode == 0, run.describe()
    assert "epoch 2: loss" in run.stdout and "test accuracy" in run.stdout, run.describe()
    assert identical in run.stdout, run.describe()
