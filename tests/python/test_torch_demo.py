"""examples/torch_fashion_mnist.py on 2 ranks, kept short with a training subset:
rank 0 writes checkpoints, a second run resumes after the last one, and every
rank ends with identical parameters. (`make demo FRAMEWORK=torch` runs it in full.)"""

from mpi_harness import REPO_ROOT, run_ranks

DEMO = REPO_ROOT / "examples" / "torch_fashion_mnist.py"


def run_demo(checkpoints, *args):
    run = run_ranks(DEMO, 2, timeout=240, args=["--train-examples", "1024", "--checkpoint-dir", checkpoints, *args])
    assert not run.timed_out and run.returncode == 0, run.describe()
    assert "parameters bitwise identical on all ranks" in run.stdout, run.describe()
    return run


def test_checkpoint_and_resume(tmp_path):
    first = run_demo(tmp_path, "--epochs", "1", "--fresh")
    assert "epoch 1: loss" in first.stdout, first.describe()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-1.pt"], first.describe()

    resumed = run_demo(tmp_path, "--epochs", "2")
    assert f"resuming after epoch 1 from {tmp_path / 'epoch-1.pt'}" in resumed.stdout, resumed.describe()
    assert "epoch 1: loss" not in resumed.stdout and "epoch 2: loss" in resumed.stdout, resumed.describe()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-1.pt", "epoch-2.pt"], resumed.describe()
