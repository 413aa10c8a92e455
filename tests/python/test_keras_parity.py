"""Horovod parity of lockstep.keras (issue 25) on both Keras lines: Keras 3 on the
TensorFlow backend at 2 and 3 ranks (and on its JAX backend, for the gradient
aggregation inside jit), and Keras 2 scripts through tf-keras with
TF_USE_LEGACY_KERAS=1 (lockstep.keras then uses tf.keras). The Keras 2 and JAX
runs stay at 2 ranks: what depends on the rank count is the same code as on Keras 3
at 3 ranks, and each launch costs about half a minute of CPU. The JAX backend's run
shares its launch with the frontend's checks: test_keras_frontend.py."""

import importlib.util

import pytest
from mpi_harness import DESYNC_LIMIT, run_ranks

KERAS2 = {"TF_USE_LEGACY_KERAS": "1", **DESYNC_LIMIT}


def run(num_ranks, env, tmp_path, *options):
    result = run_ranks("keras_parity.py", num_ranks, timeout=300, env=env, args=[tmp_path, *options])
    result.assert_all_ranks_passed(num_ranks)


def test_keras3(num_ranks, tmp_path):
    # At 3 ranks only what depends on the rank count (model.fit and saving: 2 ranks).
    run(num_ranks, {"KERAS_BACKEND": "tensorflow", **DESYNC_LIMIT}, tmp_path, *(["quick"] if num_ranks > 2 else []))


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="tf-keras is not installed")
def test_keras2_through_tf_keras(built_extension, tmp_path):
    run(2, KERAS2, tmp_path)
