"""Multi-host runs on a pretend cluster: 5 ranks on 3 network-namespace hosts (2+2+1).

Every collective and dtype, local/cross topology per host, and the torch demo across
hosts. Skipped, with the reason, where namespaces cannot be made (not root, no `ip`).
"""

import pytest

import pretend_cluster

SLOTS = [2, 2, 1]
SHM_ACTIVE = "go through shared memory"


@pytest.fixture(scope="module")
def cluster(built_extension):
    reason = pretend_cluster.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with pretend_cluster.PretendCluster(SLOTS) as made:
        yield made


def hosts_by_rank(cluster):
    return ",".join(h for h, slots in zip(cluster.hostnames, cluster.slots) for _ in range(slots))


def test_allreduce_every_dtype_and_op_across_hosts(cluster):
    run = cluster.run_script("allreduce_all.py", timeout=240, env={"LOCKSTEP_LOG_LEVEL": "debug"})
    run.assert_all_ranks_passed(5)
    # The flat path: ranks span hosts, so no single shared-memory window holds them all.
    assert SHM_ACTIVE not in run.stderr, run.describe()


def test_data_movement_and_topology_on_each_host(cluster, tmp_path):
    run = cluster.run_script("data_movement.py", timeout=240,
                             env={"LOCKSTEP_TEST_TMP": str(tmp_path),
                                  "LOCKSTEP_TEST_HOSTS": hosts_by_rank(cluster)})
    run.assert_all_ranks_passed(5)


def test_torch_demo_across_two_hosts(cluster, tmp_path):
    # One rank on each of the first two hosts; the demo ends by checking that every
    # rank holds bitwise-identical parameters.
    demo = pretend_cluster.mpi_harness.REPO_ROOT / "examples" / "torch_fashion_mnist.py"
    program = [pretend_cluster.sys.executable, str(demo), "--train-examples", "1024", "--epochs", "1",
               "--fresh", "--checkpoint-dir", str(tmp_path)]
    run = cluster.mpirun(program, num_ranks=2, timeout=240, extra=["--map-by", "ppr:1:node", "--display-map"])
    assert not run.timed_out and run.returncode == 0, run.describe()
    assert "parameters bitwise identical on all ranks" in run.stdout, run.describe()
    assert "epoch 1: loss" in run.stdout, run.describe()
    for host in cluster.hostnames[:2]:
        assert f"Data for node: {host}\tNum slots: 2\tMax slots: 0\tNum procs: 1" in run.stdout, run.describe()
