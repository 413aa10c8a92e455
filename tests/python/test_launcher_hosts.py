"""lockstep-run across hosts: -H, hostfiles, Slurm allocations, interfaces, srun.

Command lines only (no launch); the launch on hosts is in test_multihost.py.
"""

import pytest
from test_launcher import build, launcher, option_values, run_launcher

host_lists = launcher.host_lists

SLURM = {
    "SLURM_JOB_ID": "42",
    "SLURM_JOB_NODELIST": "node[1-3,5]",
    "SLURM_TASKS_PER_NODE": "2(x3),1",
    "SLURM_NTASKS": "7",
}


def build_in(argv, env):
    args = launcher.parse_args(argv)
    launcher.validate(args, env)
    return launcher.build_mpirun_command(args, env, core_count=2, euid=0)


def test_host_list_merges_repeats_and_defaults_to_one_slot():
    assert host_lists.parse_host_list("a:2,b,a:1") == [("a", 3), ("b", 1)]


def test_hostfile_in_horovod_and_open_mpi_syntax():
    text = "# workers\nnode1 slots=4\nnode2 slots=2 max_slots=8   # comment\n\nnode3\nnode4:3\nnode3 max-slots=2\n"
    assert host_lists.parse_hostfile(text) == [("node1", 4), ("node2", 2), ("node3", 2), ("node4", 3)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("node1 slots=0\n", "line 1.*slot count '0'"),
        ("node1 slots=x\n", "slot count 'x'"),
        ("node1\nnode2 cpus=4\n", "line 2.*unknown setting 'cpus'"),
        ("node1 4\n", "expected key=value"),
        ("# nothing\n\n", "names no hosts"),
    ],
)
def test_bad_hostfiles_name_the_line(text, message):
    with pytest.raises(host_lists.HostsError, match=message):
        host_lists.parse_hostfile(text, "hosts.txt")


@pytest.mark.parametrize(
    "nodelist, expected",
    [
        ("node[1-3,5]", ["node1", "node2", "node3", "node5"]),
        ("gpu07", ["gpu07"]),
        ("a[08-10],b", ["a08", "a09", "a10", "b"]),
        ("rack[1-2]-n[1,3]", ["rack1-n1", "rack1-n3", "rack2-n1", "rack2-n3"]),
    ],
)
def test_slurm_nodelists_expand(nodelist, expected):
    assert host_lists.expand_nodelist(nodelist) == expected


@pytest.mark.parametrize("nodelist", ["node[3-1]", "node[1-x]", "node[1-2", "a,,b"])
def test_bad_slurm_nodelists_are_rejected(nodelist):
    with pytest.raises(host_lists.HostsError, match="Slurm node list"):
        host_lists.expand_nodelist(nodelist)


def test_slurm_tasks_per_node():
    assert host_lists.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert host_lists.expand_tasks_per_node("4") == [4]
    with pytest.raises(host_lists.HostsError, match="SLURM_TASKS_PER_NODE"):
        host_lists.expand_tasks_per_node("2(3)")


def test_slurm_hosts_from_tasks_per_node_ntasks_or_one_each():
    assert host_lists.slurm_hosts(SLURM) == [("node1", 2), ("node2", 2), ("node3", 2), ("node5", 1)]
    spread = {"SLURM_JOB_ID": "1", "SLURM_NODELIST": "n[1-3]", "SLURM_NTASKS": "5"}
    assert host_lists.slurm_hosts(spread) == [("n1", 2), ("n2", 2), ("n3", 1)]
    assert host_lists.slurm_hosts({"SLURM_JOB_ID": "1", "SLURM_NODELIST": "n[1-2]"}) == [("n1", 1), ("n2", 1)]
    with pytest.raises(host_lists.HostsError, match="gives 2 counts for 4 nodes"):
        host_lists.slurm_hosts({**SLURM, "SLURM_TASKS_PER_NODE": "2(x2)"})


def test_slurm_allocation_becomes_hosts_and_rank_count():
    command = build_in(["python", "train.py"], SLURM).command
    assert command[:3] == ["mpirun", "-np", "7"]
    assert option_values(command, "-H") == ["node1:2,node2:2,node3:2,node5:1"]
    assert option_values(command, "--bind-to") == ["none"] and "--oversubscribe" not in command
    # -np below the allocation; -H, --hostfile and --no-slurm override it.
    assert build_in(["-np", "3", "x"], SLURM).command[:3] == ["mpirun", "-np", "3"]
    assert option_values(build_in(["-H", "a:2", "x"], SLURM).command, "-H") == ["a:2"]
    assert "-H" not in build_in(["--no-slurm", "-np", "2", "x"], SLURM).command


def test_hostfile_becomes_hosts(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a slots=2\nb slots=3\n")
    command = build(["--hostfile", str(hostfile), "python", "t.py"]).command
    assert command[:3] == ["mpirun", "-np", "5"] and option_values(command, "-H") == ["a:2,b:3"]
    assert "--oversubscribe" in build(["-np", "6", "--hostfile", str(hostfile), "x"]).command


def test_missing_hostfile_and_conflicts_are_clear_errors(tmp_path):
    result = run_launcher(["--hostfile", str(tmp_path / "none"), "x"])
    assert result.returncode == 2 and "cannot read --hostfile" in result.stderr, result.stderr
    result = run_launcher(["-H", "a:1", "--hostfile", "f", "x"])
    assert result.returncode == 2 and "either -H or --hostfile" in result.stderr, result.stderr
    result = run_launcher(["--launcher", "srun", "-np", "2", "x"], env={"PATH": "/usr/bin"})
    assert result.returncode == 2 and "needs a Slurm allocation" in result.stderr, result.stderr


def test_network_interface_selects_both_mpi_transports():
    command = build(["-np", "2", "-H", "a:1,b:1", "--network-interface", "eth1, 10.0.0.0/24", "x"]).command
    mca = [command[i + 1 : i + 3] for i, part in enumerate(command) if part == "--mca"]
    assert ["btl_tcp_if_include", "eth1,10.0.0.0/24"] in mca
    assert ["oob_tcp_if_include", "eth1,10.0.0.0/24"] in mca
    assert ["mpi_yield_when_idle", "1"] in mca


def test_srun_when_asked_inside_slurm():
    launch = build_in(
        [
            "--launcher",
            "srun",
            "--network-interface",
            "ib0",
            "--mpi-args=--mpi=pmix",
            "--log-level",
            "debug",
            "python",
            "t.py",
        ],
        SLURM,
    )
    assert launch.command == ["srun", "--ntasks", "7", "--kill-on-bad-exit=1", "--mpi=pmix", "python", "t.py"]
    assert launch.env["OMPI_MCA_btl_tcp_if_include"] == "ib0"
    assert launch.env["OMPI_MCA_mpi_yield_when_idle"] == "1"
    assert launch.env["LOCKSTEP_LOG_LEVEL"] == "debug"


def test_dry_run_shows_the_slurm_command():
    result = run_launcher(["--dry-run", "python", "t.py"], env={"PATH": "/usr/bin", **SLURM})
    assert result.returncode == 0, result.stderr
    assert "-np 7" in result.stdout and "-H node1:2,node2:2,node3:2,node5:1" in result.stdout
