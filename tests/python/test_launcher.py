"""lockstep-run: the mpirun command lines it builds, its errors, and real launches.

The launcher's cli.py is loaded from its file, not through the lockstep package, because the
launcher must work (and be tested) without the compiled core.
"""

import importlib.util
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN_PY = os.path.join(REPO_ROOT, "python", "lockstep", "launcher", "cli.py")


def load_launcher():
    spec = importlib.util.spec_from_file_location("lockstep_run_under_test", RUN_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


launcher = load_launcher()


def build(argv, env=None, core_count=2, euid=0):
    args = launcher.parse_args(argv)
    launcher.validate(args)
    return launcher.build_mpirun_command(args, env or {}, core_count=core_count, euid=euid)


def option_values(command, flag):
    return [command[i + 1] for i, part in enumerate(command) if part == flag]


def run_launcher(argv, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, RUN_PY] + argv, capture_output=True, text=True, env=env or dict(os.environ), timeout=timeout
    )


def test_local_launch_binds_each_rank_to_its_share_of_cores_and_yields():
    command = build(["-np", "2", "python", "train.py"]).command
    assert command[:4] == ["mpirun", "-np", "2", "--allow-run-as-root"]
    assert option_values(command, "--bind-to") == ["core"]
    assert option_values(command, "--map-by") == ["slot:PE=1"]
    # 8 physical cores (however many hyperthreads): 3 ranks get 2 cores each.
    shares = build(["-np", "3", "python", "train.py"], core_count=8).command
    assert option_values(shares, "--map-by") == ["slot:PE=2"] and "--oversubscribe" not in shares
    mca = command.index("--mca")
    assert command[mca + 1 : mca + 3] == ["mpi_yield_when_idle", "1"]
    assert "--oversubscribe" not in command
    assert "-H" not in command
    assert command[-2:] == ["python", "train.py"]


def test_non_root_user_gets_no_allow_run_as_root():
    assert "--allow-run-as-root" not in build(["-np", "2", "x"], euid=1000).command


def test_more_ranks_than_cores_oversubscribes():
    assert "--oversubscribe" in build(["-np", "3", "x"], core_count=2).command
    assert "--oversubscribe" not in build(["-np", "4", "x"], core_count=4).command


def test_host_slots_decide_oversubscription():
    fits = build(["-np", "4", "-H", "a:2,b:2", "x"], core_count=1).command
    assert option_values(fits, "-H") == ["a:2,b:2"]
    assert "--oversubscribe" not in fits
    too_many = build(["-np", "5", "-H", "a:2,b:2", "x"], core_count=64).command
    assert "--oversubscribe" in too_many
    # A host without a slot count is one slot.
    assert "--oversubscribe" in build(["-np", "3", "-H", "a,b", "x"], core_count=64).command


@pytest.mark.parametrize("hosts", ["a:0", ":2", "a:two", "a:2,,b:1"])
def test_malformed_hosts_are_rejected(hosts):
    with pytest.raises(launcher.LaunchError, match="-H"):
        build(["-np", "2", "-H", hosts, "x"])


def test_options_become_forwarded_lockstep_variables():
    launch = build(
        [
            "-np",
            "2",
            "--fusion-threshold-mb",
            "2.5",
            "--cycle-time-ms",
            "3.5",
            "--cache-capacity",
            "0",
            "--log-level",
            "debug",
            "--timeline",
            "t.json",
            "x",
        ]
    )
    expected = {
        "LOCKSTEP_FUSION_THRESHOLD": str(int(2.5 * 1024 * 1024)),
        "LOCKSTEP_CYCLE_TIME": "3.5",
        "LOCKSTEP_CACHE_CAPACITY": "0",
        "LOCKSTEP_LOG_LEVEL": "debug",
        "LOCKSTEP_TIMELINE": os.path.abspath("t.json"),
        "LOCKSTEP_HOST_NAMES": "localhost",  # for HOROVOD_HOSTNAME, as horovodrun names it without -H
    }
    assert launch.settings == expected
    for name, value in expected.items():
        assert launch.env[name] == value
    assert set(expected) <= set(option_values(launch.command, "-x"))


def test_environment_forwarding_is_selective():
    env = {
        "LOCKSTEP_STALL_CHECK_DISABLE": "1",
        "HOROVOD_CACHE_CAPACITY": "8",
        "PATH": "/bin",
        "PYTHONPATH": "/p",
        "LD_LIBRARY_PATH": "/l",
        "VIRTUAL_ENV": "/v",
        "HOME": "/root",
        "MY_LOCKSTEP_THING": "no",
    }
    exported = option_values(build(["-np", "2", "x"], env=env).command, "-x")
    assert sorted(exported) == sorted(
        [
            "LOCKSTEP_STALL_CHECK_DISABLE",
            "LOCKSTEP_HOST_NAMES",
            "HOROVOD_CACHE_CAPACITY",
            "PATH",
            "PYTHONPATH",
            "LD_LIBRARY_PATH",
            "VIRTUAL_ENV",
        ]
    )


def test_host_names_travel_to_the_workers_for_horovod_hostname():
    # init() sets each worker's HOROVOD_HOSTNAME from this list (tests/python/test_horovod_parity.py).
    for argv, names in (
        (["-np", "2", "x"], "localhost"),
        (["-np", "3", "-H", "node2:2,10.0.0.7:1", "x"], "node2,10.0.0.7"),
    ):
        launch = build(argv)
        assert launch.settings["LOCKSTEP_HOST_NAMES"] == names and launch.env["LOCKSTEP_HOST_NAMES"] == names
        assert "LOCKSTEP_HOST_NAMES" in option_values(launch.command, "-x")


def test_user_command_keeps_its_own_options():
    command = build(["-np", "2", "--", "python", "train.py", "-np", "7", "--lr", "0.1"]).command
    assert command[-6:] == ["python", "train.py", "-np", "7", "--lr", "0.1"]
    assert option_values(command, "-np")[0] == "2"


def test_mpi_args_are_appended_before_the_command():
    command = build(["-np", "2", "--mpi-args", "--tag-output -x FOO", "python", "t.py"]).command
    assert command[-5:] == ["--tag-output", "-x", "FOO", "python", "t.py"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["python", "t.py"], "-np is required"),
        (["-np", "0", "python", "t.py"], "-np must be at least 1"),
        (["-np", "2"], "no command given"),
        (["-np", "2", "--cycle-time-ms", "0", "x"], "--cycle-time-ms must be > 0"),
    ],
)
def test_bad_invocations_fail_with_a_clear_message(argv, message):
    result = run_launcher(argv)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_mpirun_is_reported(tmp_path):
    # The launcher's files without a built core, and no mpirun on PATH.
    package = tmp_path / "lockstep"
    (package / "launcher").mkdir(parents=True)
    source = os.path.join(REPO_ROOT, "python", "lockstep")
    names = ["__init__.py"] + [os.path.join("launcher", name) for name in os.listdir(os.path.join(source, "launcher"))]
    for name in names:
        if name.endswith(".py"):
            (package / name).write_text(open(os.path.join(source, name)).read())
    env = dict(os.environ, PATH=str(tmp_path / "bin"))
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, "-S", str(package / "launcher" / "cli.py"), "-np", "2", "python", "t.py"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "no mpirun" in result.stderr


def test_the_builds_own_mpirun_launches_not_the_one_on_path(tmp_path):
    # Another MPI's mpirun first on PATH (a cluster module, Debian's) must not be used:
    # it cannot start the ranks of the MPI lockstep was built against as one job.
    impostor = tmp_path / "mpirun"
    impostor.write_text("#!/bin/sh\necho impostor\nexit 3\n")
    impostor.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    result = run_launcher(["-np", "2", "--dry-run", "python", "t.py"], env=env)
    assert result.returncode == 0, result.stderr
    mpirun = [word for word in result.stdout.split() if "=" not in word][0]  # after the settings
    assert mpirun != str(impostor) and os.path.basename(mpirun) == "mpirun", result.stdout
    version = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=60).stdout
    assert "Open MPI" in version


def test_dry_run_prints_a_shell_line_without_running():
    result = run_launcher(["-np", "3", "--cycle-time-ms", "4", "--dry-run", "python", "-c", "raise SystemExit(1)"])
    assert result.returncode == 0
    line = result.stdout.strip()
    assert line.startswith("LOCKSTEP_CYCLE_TIME=4 ")
    assert " -np 3 " in line
    assert line.endswith("python -c 'raise SystemExit(1)'")


def test_check_build_lists_backends_and_frameworks():
    result = run_launcher(["--check-build"])
    assert result.returncode == 0
    for name in ("MPI", "NCCL", "numpy", "torch", "tensorflow", "keras", "jax"):
        assert name in result.stdout
    # numpy is importable wherever these tests run, so its row must be ticked.
    assert any(line.strip().startswith("[X] numpy") for line in result.stdout.splitlines())


BLOCK_CORE_THEN_CHECK_BUILD = """
import sys

class BrokenCore:  # as if the extension failed to build or load
    def find_spec(self, name, path=None, target=None):
        if name == "lockstep._core":
            raise ImportError("simulated: _core.so is missing")

sys.meta_path.insert(0, BrokenCore())
from lockstep.launcher.cli import main
sys.exit(main(["--check-build"]))
"""


def test_check_build_reports_a_broken_core_instead_of_crashing():
    # The installed lockstep-run imports lockstep.launcher.cli through the lockstep package,
    # so the package must not need the compiled core just to be imported.
    result = subprocess.run(
        [sys.executable, "-c", BLOCK_CORE_THEN_CHECK_BUILD], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    mpi_row = next(line for line in result.stdout.splitlines() if "MPI" in line)
    assert mpi_row.strip().startswith("[ ] MPI") and "simulated: _core.so is missing" in mpi_row


# One write() per rank: mpirun interleaves the ranks' output at write granularity,
# and print() writes piece by piece when PYTHONUNBUFFERED is set.
RANK_REPORT = (
    "import os; os.write(1, f\"rank {os.environ['OMPI_COMM_WORLD_RANK']} "
    "{os.environ.get('LOCKSTEP_CYCLE_TIME')}\\n\".encode())"
)


@pytest.mark.timeout(120)
def test_two_ranks_really_run_with_the_settings():
    result = run_launcher(["-np", "2", "--cycle-time-ms", "7", sys.executable, "-c", RANK_REPORT])
    assert result.returncode == 0, result.stderr
    reports = sorted(line for line in result.stdout.splitlines() if line.startswith("rank "))
    assert reports == ["rank 0 7", "rank 1 7"]


@pytest.mark.timeout(120)
def test_a_failing_rank_fails_the_launch():
    script = "import os, sys; sys.exit(3 if os.environ['OMPI_COMM_WORLD_RANK'] == '1' else 0)"
    result = run_launcher(["-np", "2", sys.executable, "-c", script])
    assert result.returncode == 3


def test_ranks_stay_unbound_when_oversubscribed_across_hosts_or_told_otherwise():
    for command in (
        build(["-np", "3", "x"], core_count=2).command,
        build(["-np", "2", "-H", "a:1,b:1", "x"], core_count=8).command,
    ):
        assert option_values(command, "--bind-to") == ["none"]
        assert option_values(command, "--map-by") == ["slot"]
    own = build(["-np", "2", "--mpi-args", "--bind-to socket", "x"]).command
    assert option_values(own, "--bind-to") == ["socket"] and "--map-by" not in own


def test_usable_cores_counts_physical_cores_in_the_affinity_mask():
    cores = launcher.usable_cores()
    assert 1 <= cores <= len(os.sched_getaffinity(0))
