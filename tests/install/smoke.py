"""A 2-rank smoke test of an installed lockstep (tests/install/check_wheel.sh runs it
from a fresh virtual environment, outside the source tree): the package imports from
that environment, and every frontend whose framework the environment has runs a
collective through its own library (TensorFlow's op library, JAX's FFI library).

    lockstep-run -np 2 python smoke.py SOURCE_TREE
"""

import importlib.metadata
import importlib.util
import os
import sys

import numpy as np


def check(condition, message):
    if not condition:  # not assert: python -O must not skip the checks
        raise SystemExit(f"rank {os.environ.get('OMPI_COMM_WORLD_RANK')}: FAILED: {message}")


def check_installed(source_tree):
    import lockstep

    location = os.path.realpath(lockstep.__file__)
    check(
        not location.startswith(os.path.realpath(source_tree) + os.sep),
        f"lockstep imported from the source tree ({location}), not from the installed wheel",
    )
    check(
        importlib.metadata.version("lockstep") == lockstep.__version__,
        f"installed metadata {importlib.metadata.version('lockstep')} != lockstep.__version__",
    )
    return os.path.dirname(location)


def has(module):
    return importlib.util.find_spec(module) is not None


def expected_sum(size):
    return np.arange(4, dtype=np.float32) * size + sum(range(size))


def smoke_numpy(rank, size):
    import lockstep.numpy as hvd

    hvd.init()
    got = hvd.allreduce(np.arange(4, dtype=np.float32) + rank, op=hvd.Sum, name="smoke.numpy")
    check(np.array_equal(got, expected_sum(size)), f"numpy allreduce gave {got}")


def smoke_torch(rank, size):
    import torch

    import lockstep.torch as hvd

    got = hvd.allreduce(torch.arange(4, dtype=torch.float32) + rank, op=hvd.Sum, name="smoke.torch")
    check(np.array_equal(got.numpy(), expected_sum(size)), f"torch allreduce gave {got}")


def smoke_tensorflow(rank, size, package_dir):
    check(
        os.path.exists(os.path.join(package_dir, "_tensorflow_ops.so")),
        "TensorFlow is installed but the wheel has no _tensorflow_ops.so",
    )
    import tensorflow as tf

    import lockstep.tensorflow as hvd

    got = tf.function(lambda x: hvd.allreduce(x, op=hvd.Sum, name="smoke.tf"))(tf.range(4, dtype=tf.float32) + rank)
    check(np.array_equal(got.numpy(), expected_sum(size)), f"tensorflow allreduce gave {got}")


def smoke_keras(rank, size):
    import lockstep.keras as hvd

    got = np.asarray(hvd.allreduce(np.arange(4, dtype=np.float32) + rank, op=hvd.Sum, name="smoke.keras"))
    check(np.array_equal(got, expected_sum(size)), f"keras allreduce gave {got}")


def smoke_jax(rank, size, package_dir):
    check(os.path.exists(os.path.join(package_dir, "_jax_ops.so")), "JAX is installed but the wheel has no _jax_ops.so")
    import jax
    import jax.numpy as jnp

    import lockstep.jax as hvd

    got = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum, name="smoke.jax"))(jnp.arange(4, dtype=jnp.float32) + rank)
    check(np.array_equal(np.asarray(got), expected_sum(size)), f"jax allreduce inside jit gave {got}")


def main():
    package_dir = check_installed(sys.argv[1])
    rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    smoke_numpy(rank, size)
    ran = ["numpy"]
    if has("torch"):
        smoke_torch(rank, size)
        ran.append("torch")
    if has("tensorflow"):
        smoke_tensorflow(rank, size, package_dir)
        ran.append("tensorflow")
    if has("keras"):
        smoke_keras(rank, size)
        ran.append("keras")
    if has("jax"):
        smoke_jax(rank, size, package_dir)
        ran.append("jax")
    import lockstep

    lockstep.shutdown()
    sys.stdout.write(f"rank {rank}: installed lockstep works: {', '.join(ran)}\n")  # one write per line
    sys.stdout.flush()


if __name__ == "__main__":
    main()
