"""Multi-host runs on a pretend cluster: 5 ranks on 3 network-namespace hosts (2+2+1).

Every collective and dtype, local/cross topology per host, and the torch demo across
hosts. Each check of a rank script is a test (scripts/checks.py), one job for all of
a test's checks. Skipped, with the reason, where namespaces cannot be made (not root,
no `ip`).
"""

import sys

import pretend_cluster
import pytest

RUN_PY = pretend_cluster.mpi_harness.REPO_ROOT / "python" / "lockstep" / "launcher" / "cli.py"

SHM_ACTIVE = "go through shared memory"
HIERARCHICAL_ACTIVE = "hierarchical allreduce: shared memory within each host, MPI across hosts"


def hosts_by_rank(cluster):
    return ",".join(h for h, slots in zip(cluster.hostnames, cluster.slots) for _ in range(slots))


@pytest.mark.rank_checks("allreduce_all.py")
def test_allreduce_every_dtype_and_op_across_hosts(cluster, rank_check):
    run = rank_check.run_by(5, cluster.run_script, "allreduce_all.py", timeout=240, env={"LOCKSTEP_LOG_LEVEL": "debug"})
    # The flat path: ranks span hosts, so no single shared-memory window holds them all.
    assert SHM_ACTIVE not in run.stderr, run.describe()


@pytest.mark.rank_checks("data_movement.py")
def test_launcher_with_hosts_runs_data_movement_and_topology_on_each_host(cluster, rank_check):
    # lockstep-run -H ... --network-interface SUBNET, started on the first host; only the
    # rsh agent (how this cluster reaches its hosts instead of ssh) comes through --mpi-args.
    agent = " ".join(cluster.agent_args())
    hosts = ",".join(f"{h}:{s}" for h, s in zip(cluster.hostnames, cluster.slots))
    command = [
        sys.executable,
        str(RUN_PY),
        "-H",
        hosts,
        "--network-interface",
        pretend_cluster.SUBNET,
        "--mpi-args",
        agent,
        "--verbose",
        sys.executable,
        str(pretend_cluster.mpi_harness.SCRIPTS_DIR / "data_movement.py"),
    ]
    run = rank_check.run_by(
        5,
        pretend_cluster.run_command,
        cluster.on_host(0, command),
        timeout=240,
        env={"LOCKSTEP_TEST_TMP": str(rank_check.tmp_path), "LOCKSTEP_TEST_HOSTS": hosts_by_rank(cluster)},
    )
    assert "-np 5" in run.stderr and f"-H {hosts}" in run.stderr, run.describe()
    assert f"btl_tcp_if_include {pretend_cluster.SUBNET}" in run.stderr, run.describe()


def test_torch_demo_across_two_hosts(cluster, tmp_path):
    # One rank on each of the first two hosts; the demo ends by checking that every
    # rank holds bitwise-identical parameters.
    demo = pretend_cluster.mpi_harness.REPO_ROOT / "examples" / "torch_fashion_mnist.py"
    program = [
        sys.executable,
        str(demo),
        "--train-examples",
        "1024",
        "--epochs",
        "1",
        "--fresh",
        "--checkpoint-dir",
        str(tmp_path),
    ]
    run = cluster.mpirun(program, num_ranks=2, timeout=240, extra=["--map-by", "ppr:1:node", "--display-map"])
    assert not run.timed_out and run.returncode == 0, run.describe()
    assert "parameters bitwise identical on all ranks" in run.stdout, run.describe()
    assert "epoch 1: loss" in run.stdout, run.describe()
    # --display-map's sections, one a node (ORTE and PRRTE word them differently).
    sections = {part.split()[0]: part for part in run.stdout.split("Data for node: ")[1:]}
    for host in cluster.hostnames[:2]:
        assert "Num procs: 1" in sections.get(host, ""), run.describe()


@pytest.mark.rank_checks("allreduce_all.py")
@pytest.mark.parametrize("switch", ["LOCKSTEP_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLREDUCE"])
def test_hierarchical_allreduce_matches_exactly(cluster, switch, rank_check):
    # The same exact-integer checks as the flat path, every dtype and op, large
    # tensors in several chunks and fused bursts: shared memory within each host, MPI
    # among the hosts' leaders (node3's single rank leads alone).
    env = {"LOCKSTEP_LOG_LEVEL": "debug", switch: "1"}
    run = rank_check.run_by(5, cluster.run_script, "allreduce_all.py", timeout=240, env=env)
    assert run.stderr.count(HIERARCHICAL_ACTIVE) == 5, run.describe()


@pytest.mark.rank_checks("horovod_env.py")
@pytest.mark.parametrize("listed_as", ["names", "addresses"])
def test_horovod_worker_environment_names_each_ranks_host_from_the_hostfile(cluster, listed_as, rank_check):
    # A Horovod script reading HOROVOD_RANK ... HOROVOD_HOSTNAME, started with
    # lockstep-run --hostfile with the hosts listed in reverse, by name or by address.
    order = list(reversed(range(len(cluster.hostnames))))
    listed = cluster.hostnames if listed_as == "names" else cluster.addresses
    hostfile = cluster.hostfile.parent / f"reversed-hostfile-{listed_as}"
    hostfile.write_text("".join(f"{listed[i]} slots={cluster.slots[i]}\n" for i in order))
    aliases = ",".join(f"{name}={entry}" for name, entry in zip(cluster.hostnames, listed))
    # Each rank's HOROVOD_HOSTNAME must be the listed name of the host it runs on (the
    # pretend hosts are listed under their own names), wherever mpirun placed it: Open
    # MPI 5 puts rank 0 on node3, the first listed; Open MPI 4.1 on node1, its own host.
    command = [sys.executable, str(RUN_PY), "--hostfile", str(hostfile), "--network-interface", pretend_cluster.SUBNET]
    command += ["--mpi-args", " ".join(cluster.agent_args()), sys.executable]
    command.append(str(pretend_cluster.mpi_harness.SCRIPTS_DIR / "horovod_env.py"))
    run = rank_check.run_by(
        5,
        pretend_cluster.run_command,
        cluster.on_host(0, command),
        timeout=240,
        env={"LOCKSTEP_TEST_HOSTS": "this host", "LOCKSTEP_TEST_HOST_ALIASES": aliases},
    )
    if rank_check.name == "environment_after_init":
        for entry in listed:
            assert f"HOROVOD_HOSTNAME={entry}" in run.stdout, run.describe()
