"""Horovod parity of lockstep.keras (issue 25) on both Keras lines: Keras 3 on the
TensorFlow backend at 2 and 3 ranks (and on its JAX backend, for the gradient
aggregation inside jit), and Keras 2 scripts through tf-keras with
TF_USE_LEGACY_KERAS=1 (lockstep.keras then uses tf.keras). The Keras 2 and JAX
runs stay at 2 ranks: what depends on the rank count is the same code as on Keras 3
at 3 ranks, and each launch costs about half a minute of CPU. The JAX backend's run
shares its launch with the frontend's checks: test_keras_frontend.py. Each check is
a test (scripts/checks.py), one launch for all of a test's checks."""

import importlib.util

import pytest
from mpi_harness import DESYNC_LIMIT

KERAS3 = {"KERAS_BACKEND": "tensorflow", **DESYNC_LIMIT}
KERAS2 = {"TF_USE_LEGACY_KERAS": "1", **DESYNC_LIMIT}


def run(rank_check, num_ranks, env):
    rank_check.run(num_ranks, timeout=300, env=env, args=[rank_check.tmp_path])


@pytest.mark.rank_checks("keras_parity.py")
def test_keras3_at_2_ranks(rank_check):
    run(rank_check, 2, KERAS3)


@pytest.mark.rank_checks("keras_parity.py", without=["fit_saving_and_loading"])
def test_keras3_at_3_ranks(rank_check):
    # Only what depends on the rank count (model.fit and saving: 2 ranks).
    run(rank_check, 3, KERAS3)


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="tf-keras is not installed")
@pytest.mark.rank_checks("keras_parity.py")
def test_keras2_through_tf_keras(rank_check):
    run(rank_check, 2, KERAS2)
