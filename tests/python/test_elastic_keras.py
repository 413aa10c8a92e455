"""Elastic Keras 3 (TensorFlow backend) on the pretend cluster, 3 ranks (one per
host): model.fit with the elastic callbacks, and a custom loop with
DistributedGradientTape and TensorFlowKerasState. A host's rank is SIGKILLed; the
other two go on from the last commit (in process under ULFM, else in a new job) and ends with the weights of an
uninterrupted run with the same membership history, computed in one process with the
ranks simulated (float32, so to 1e-5). The first job's ranks wait once a commit is made
(elastic_cluster.hold), so it is still training when the host goes."""

import sys

import elastic_cluster
import numpy as np
import pytest
from elastic_cluster import KERAS_SCRIPT, ElasticRun, assert_recovered, history, hold, kill_ranks, result


@pytest.mark.parametrize("mode", ["fit", "loop"])
def test_keras_job_loses_a_host_and_resumes_from_the_last_commit(cluster, tmp_path, mode):
    run = ElasticRun(
        cluster,
        tmp_path,
        ["node1:1", "node2:1", "node3:1"],
        ("--min-np", "2"),
        program=[sys.executable, str(KERAS_SCRIPT), mode],
        env=hold(1),
    )
    try:
        run.wait_for_progress(size=3, commits=1, timeout=180)
        assert kill_ranks(cluster, 2, KERAS_SCRIPT) == 1
        code, output = run.finish()
    finally:
        run.stop()
    assert code == 0, output
    assert_recovered(output, 2)
    membership = history(output)
    assert [size for size, _ in membership] == [3, 2] and membership[1][1] >= 1, output
    want = elastic_cluster.reference(membership, (str(KERAS_SCRIPT), mode))
    np.testing.assert_allclose(result(output)["weights"], want["weights"], rtol=1e-5, atol=1e-6)
