"""`lockstep-run --host-discovery-script`: the elastic supervisor.

Open MPI as installed cannot shrink a job after a failure (no ULFM): a dead rank
ends the mpirun job. So the supervisor runs the training as a sequence of mpirun
jobs ("generations"). It polls the discovery script about once a second, starts
mpirun on the usable hosts, and
- on a change of hosts, signals mpirun (SIGUSR1: hosts added, SIGUSR2: removed),
  which forwards the signal to every rank; the ranks stop together at their next
  commit (exit code 75) and the next job starts on the new hosts;
- on a lost peer (a rank's exit code 76, or mpirun reporting a rank killed by a
  signal), blacklists the hosts named and starts the next job without them;
- on a worker that raised (a bug), blacklists its host, or ends the run if every
  host of the job raised;
each next job resumes from the newest commit a surviving host holds. Every restart
counts against --reset-limit; fewer than --min-np slots for --elastic-timeout
seconds, or every host blacklisted for good, ends the run, and so does any failure
once rank 0 reported that training finished (nothing is trained twice). SIGTERM and
SIGHUP stop the job and end the run.
"""

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

if __package__:
    from . import elastic_protocol as protocol
    from . import host_discovery
else:  # cli.py loaded as a file: take the modules beside it
    import importlib.util

    def _load(name):
        spec = importlib.util.spec_from_file_location(
            f"lockstep_{name}", os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    protocol = _load("elastic_protocol")
    host_discovery = _load("host_discovery")

POLL_SECONDS = 1.0
# After the first rank reports that it leaves (or its collective watchdog ends the job),
# mpirun gets this long to end the job by itself; a host that is cut off can keep it
# waiting for good.
END_GRACE_SECONDS = 10.0
# The grace once every rank has left or is on a host rank 0 found silent: what keeps
# mpirun then is only the host it cannot reach.
ACCOUNTED_END_GRACE_SECONDS = 2.0

# Open MPI 5's prterun wraps the line after "exited on".
_KILLED = re.compile(r"on node (\S+) exited on(?: signal|\s*$)")
# The collective watchdog's last words (csrc/engine/collective_watchdog.cc): a rank was
# lost inside a data collective, and the survivors call MPI_Abort. mpirun may then wait
# for good on a host it cannot reach, and no rank reports its exit.
_WATCHDOG = re.compile(r"\[lockstep rank (\d+)\] error: a collective has waited .*Ending the job with MPI_Abort")
_BLAMED = re.compile(r"ranks? [\d, ]+ on ([^\s;]+)")
_RANKS_ON_HOST = re.compile(r"ranks? ([\d, ]+) on ([^\s;]+)")
_MPI_REPORTED = "MPI reports the process failed"
_LOCKSTEP_ERROR = re.compile(r"\[lockstep rank \d+\] error: ")


class ElasticError(Exception):
    """Why the elastic run ended unsuccessfully; one line for the user."""


@dataclass
class JobOutcome:
    returncode: int
    finished: bool = False
    hosts_updated: bool = False
    peer_lost: bool = False
    blamed: set = field(default_factory=set)
    raised: dict = field(default_factory=dict)  # {rank: (host, "ValueError: ...")}
    committed: bool = False  # a commit exists: later jobs must find one


class JobWatcher:
    """One mpirun job: its output echoed and read for the workers' reports."""

    def __init__(self, command, env):
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        self.lock = threading.Lock()
        self.ready = set()
        self.outcome = JobOutcome(returncode=None)
        self.verdicts, self.guesses = set(), set()
        # Under ULFM a rank that ends the job with MPI_Abort (its collective watchdog)
        # is reported failed by MPI on the others, and so is any rank the abort killed
        # before the report was made: no verdict on their hosts (see _mpi_reported).
        self.aborting_ranks, self.reported_failed = set(), []
        self.recoveries = []  # [(host, slots)] after each recovery in process, in order
        self.every_rank_ready = False  # rank 0 saw every rank past its handlers' install
        # The machine names MPI reports (gethostname) -> the host list's names for them.
        self.aliases = {}
        self.first_exit_report = None
        self.leaving = set()  # ranks that reported their exit, or end the job with MPI_Abort
        # [(ranks, host)] that lockstep on some rank found failed (ULFM), from its error
        # lines: what ended a job whose recovery in process did not complete.
        self.mpi_lost = []
        self._threads = [
            threading.Thread(target=self._read, args=(stream, echo), daemon=True)
            for stream, echo in ((self.process.stdout, sys.stdout), (self.process.stderr, sys.stderr))
        ]
        for thread in self._threads:
            thread.start()

    def _read(self, stream, echo):
        for line in stream:
            echo.write(line)
            echo.flush()
            self._note(line)

    def _note(self, line):
        with self.lock:
            killed = _KILLED.search(line)
            if killed:
                self.outcome.peer_lost = True
                self.outcome.blamed.add(killed.group(1))
            if _MPI_REPORTED in line and _LOCKSTEP_ERROR.search(line):
                named = line.split(_MPI_REPORTED, 1)[0]
                self.mpi_lost.append(self._mpi_report(named))
            watchdog = _WATCHDOG.search(line)
            if watchdog:
                self._note_watchdog(line, int(watchdog.group(1)))
            # mpirun forwards each rank's output in pieces, so two ranks' reports can
            # share a line ("... ready rank 0[lockstep-elastic] ready rank 1"): each
            # one counts. A rank missed here would keep the job from ever growing.
            for report in line.split(protocol.REPORT_PREFIX)[1:]:
                self._note_report(report)

    def _note_report(self, report):
        """One worker report (the text after the prefix); the lock is held."""
        ready = re.search(r"ready rank (\d+)(?: host (\S+) machine (\S+))?", report)
        if ready:
            self.ready.add(int(ready.group(1)))
            if ready.group(2):
                self.aliases[ready.group(3)] = ready.group(2)
        if protocol.ALL_READY_REPORT in report:
            self.every_rank_ready = True
        raised = re.search(rf"rank (\d+) on (\S+){re.escape(protocol.RAISED_REPORT)}(.*)", report)
        if raised:
            self.outcome.raised[int(raised.group(1))] = (raised.group(2), raised.group(3).strip())
        if protocol.COMMITTED_REPORT in report or protocol.RESUMED_REPORT in report:
            self.outcome.committed = True
        if protocol.RECOVERED_REPORT in report:
            survivors = report.split(protocol.RECOVERED_REPORT, 1)[1].split(" ranks on ", 1)[-1].split()[0]
            self.recoveries.append(
                [(host, int(slots)) for host, _, slots in (entry.rpartition(":") for entry in survivors.split(","))]
            )
        if "training finished" in report:
            self.outcome.finished = True
        if f"({protocol.EXIT_HOSTS_UPDATED})" in report:
            self.outcome.hosts_updated = True
        if f"({protocol.EXIT_PEER_LOST})" in report:
            self.outcome.peer_lost = True
            # Rank 0 finds which ranks went silent and tells the others ("as rank 0
            # found"); a rank that did not hear from rank 0 can only name rank 0.
            # A loss that MPI itself reports (ULFM) is known alike on every rank.
            named = report.split("peer lost:", 1)[-1]
            if _MPI_REPORTED in named:
                self.reported_failed.append(self._mpi_report(named))
            else:
                from_rank_0 = "as rank 0 found" in report or re.match(r"\s*rank 0 exits", report)
                (self.verdicts if from_rank_0 else self.guesses).update(_BLAMED.findall(named))
        exits = re.match(r"\s*rank (\d+) exits \(", report)
        if exits:
            self.leaving.add(int(exits.group(1)))
            if self.first_exit_report is None:
                self.first_exit_report = time.monotonic()

    def _note_watchdog(self, line, rank):
        """A rank's collective watchdog ends the job; the lock is held."""
        self.outcome.peer_lost = True
        self.aborting_ranks.add(rank)
        self.leaving.add(rank)
        named = line.split("s): ", 1)[-1]
        if " did not respond" in named:
            hosts = set(_BLAMED.findall(named.split(" did not respond", 1)[0]))
            from_rank_0 = rank == 0 or "as rank 0 found" in named
            (self.verdicts if from_rank_0 else self.guesses).update(hosts)
        if self.first_exit_report is None:
            self.first_exit_report = time.monotonic()

    def end_grace(self, assignment):
        """How long mpirun may take to end after the first rank left: short once every
        rank has left or is on a host that rank 0 found silent."""
        with self.lock:
            silent = {self.aliases.get(host, host) for host in self.verdicts}
            stranded = sum(slots for host, slots in assignment if host in silent)
            everyone = len(self.leaving) + stranded >= sum(slots for _, slots in assignment)
        return ACCOUNTED_END_GRACE_SECONDS if everyone else END_GRACE_SECONDS

    def _mpi_report(self, named):
        """One report of failed processes from MPI: (after an abort began, [(ranks, host)]);
        the lock is held."""
        groups = [({int(rank) for rank in ranks.split(",")}, host) for ranks, host in _RANKS_ON_HOST.findall(named)]
        return bool(self.aborting_ranks), groups

    def _mpi_reported_hosts(self, reports):
        """The hosts of the processes MPI reported failed, less those of reports that an
        abort may have caused: made once a rank's watchdog called MPI_Abort, or naming
        such a rank (the abort kills every rank, and MPI reports them in any order; a
        clean-clone CI run once blacklisted node1 for rank 1, killed by rank 0's abort)."""
        hosts = set()
        for after_abort, groups in reports:
            named = set().union(*(ranks for ranks, _ in groups))
            if not after_abort and not named & self.aborting_ranks:
                hosts |= {host for _, host in groups}
        return hosts

    def hosts_mpi_lost(self):
        """The hosts (host list names) whose processes MPI reported failed to lockstep."""
        with self.lock:
            return {self.aliases.get(host, host) for host in self._mpi_reported_hosts(self.mpi_lost)}

    def all_ready(self, num_proc):
        """Whether every rank may be signalled: each said so, or rank 0 did for all (a
        script may send other ranks' output elsewhere)."""
        with self.lock:
            return self.every_rank_ready or len(self.ready) >= num_proc

    def signal(self, signum):
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def stop(self):
        """End mpirun and everything it started here (SIGTERM, then SIGKILL)."""
        # Open MPI 5's prterun ignores SIGTERM while a daemon it cannot reach is left.
        for signum, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 30)):
            if self.process.poll() is not None:
                break
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass
        # mpirun puts its remote-start agents (ssh) and local ranks in process groups of
        # their own, but they stay in its session. One whose host is cut off would live on,
        # holding the output pipes, until its connection times out.
        for pid in _session_members(self.process.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def finish(self):
        self.process.wait()
        for thread in self._threads:
            thread.join(timeout=10)
        self.outcome.returncode = self.process.returncode
        failed = self._mpi_reported_hosts(self.reported_failed)
        blamed = (self.verdicts | failed) or self.guesses
        # Blame names MPI's machine names, the blacklist the host list's.
        self.outcome.blamed = {self.aliases.get(host, host) for host in self.outcome.blamed | blamed}
        return self.outcome


class Supervisor:
    def __init__(self, args, env, build_command, log=None, discover=None):
        """`discover`: () -> {host: slots}; by default the discovery script's."""
        self.args = args
        self.env = env
        self.build_command = build_command  # (hosts, num_proc, env) -> (argv, env)
        self.log = log or (lambda message: print(f"lockstep-run: {message}", file=sys.stderr, flush=True))
        cooldown = tuple(args.blacklist_cooldown_range) if args.blacklist_cooldown_range else None
        discover = discover or (lambda: host_discovery.run_discovery_script(args.host_discovery_script))
        self.hosts = host_discovery.HostManager(discover, host_discovery.Blacklist(cooldown))
        self.permanent_blacklist = cooldown is None
        self.min_np = args.min_np or args.num_proc or 1
        self.max_np = args.max_np
        self.timeout = args.elastic_timeout
        self.job_id = secrets.token_hex(8)
        # Signs the ranks' commit files; only ever in their environment, never on disk.
        self.commit_key = secrets.token_hex(32)
        self.resets = 0
        self.committed = False  # some job made a commit: later ones must resume from one
        self.job_hosts, self.blacklisted_in_job = [], set()  # the current job's hosts, and those blacklisted
        self.recovered_hosts = set()  # hosts whose lost ranks the current job recovered from in process

    def run(self):
        generation, previous = 0, None
        while True:
            # As Horovod: the first job waits for -np slots, later ones for --min-np.
            assignment = self.wait_for_slots(
                max(self.min_np, self.args.num_proc or 0) if generation == 0 else self.min_np
            )
            if previous and not {h for h, _ in previous} & {h for h, _ in assignment}:
                raise ElasticError(
                    "no host of the previous job is left, so no committed state can be "
                    f"carried over (previous: {_describe(previous)}; now: {_describe(assignment)})"
                )
            outcome = self.run_generation(assignment, generation)
            self.committed |= outcome.committed
            if self.finished(outcome):
                return 0
            raised = self.unrecovered_raises(outcome)
            self.blacklist(outcome.blamed | {host for host, _ in raised.values()})
            lost = "a lost host" if outcome.peer_lost else "a change of hosts"
            self.count_reset("a failed worker" if raised else lost)
            previous, generation = assignment, generation + 1

    def finished(self, outcome):
        """Whether the run is over after this job: True if it succeeded; raises where it
        failed for good. False: the next job resumes from the newest commit."""
        if outcome.finished:
            # The commits may be gone: a restart would train again from the start.
            if outcome.returncode == 0:
                return True
            raise ElasticError(
                f"training finished (rank 0 said so), but the job then ended with mpirun exit status "
                f"{outcome.returncode}; not training again"
            )
        raised = self.unrecovered_raises(outcome)
        if raised:
            messages = [message for _, message in raised.values()]
            # Every rank raises this one (they agreed on it), but the first to exit may end the others first.
            for message in messages:
                if message.startswith(protocol.NO_COMMIT_ERROR):
                    raise ElasticError(f"the job cannot resume: {message}")
            if {host for host, _ in raised.values()} >= set(self.job_hosts):
                rank, (host, message) = min(raised.items())
                raise ElasticError(
                    f"the training script raised on every host of the job (rank {rank} on {host}: {message}); "
                    "a restart would fail the same way"
                )
            return False
        if outcome.returncode == 0 and not (outcome.hosts_updated or outcome.peer_lost):
            return True
        if not (outcome.hosts_updated or outcome.peer_lost):
            raise ElasticError(
                f"the training script failed (mpirun exit status {outcome.returncode}) "
                "without a lost host or a change of hosts; see its output above"
            )
        return False

    def unrecovered_raises(self, outcome):
        """The workers that raised in this job ({rank: (host, message)}), less those whose
        loss the job already recovered from in process (counted and blacklisted then)."""
        return {rank: raised for rank, raised in outcome.raised.items() if raised[0] not in self.recovered_hosts}

    def recovered(self, assignment, survivors):
        """The job went on in process on `survivors` ([(host, ranks)]): the hosts that
        lost ranks are blacklisted, as after a restart, and it counts as a reset. The
        job's assignment from now on is the survivors'."""
        left = dict(survivors)
        lost = {host for host, slots in assignment if left.get(host, 0) < slots}
        self.recovered_hosts |= lost
        self.blacklist(lost)
        self.count_reset("a lost host")
        return survivors

    def blacklist(self, hosts):
        for host in sorted(set(hosts) - self.blacklisted_in_job):  # once per job: cool-downs double
            self.blacklisted_in_job.add(host)
            delay = self.hosts.blacklist.add(host)
            self.log(f"blacklisting {host}" + ("" if delay == float("inf") else f" for {delay:.0f} s"))

    def count_reset(self, reason):
        """Another reset (a new job, or a recovery in process), within --reset-limit."""
        if self.args.reset_limit is not None and self.resets >= self.args.reset_limit:
            raise ElasticError(
                f"the job has been reset {self.resets} times and needs another reset after "
                f"{reason}, exceeding --reset-limit {self.args.reset_limit}"
            )
        self.resets += 1

    def wait_for_slots(self, needed):
        """The next job's hosts, once at least `needed` slots are usable."""
        deadline = time.monotonic() + self.timeout
        while True:
            self.hosts.refresh()
            available = self.hosts.available()
            count = sum(slots for _, slots in available)
            if count >= needed:
                return host_discovery.assign(available, self.max_np)
            blacklisted = self.hosts.blacklist.hosts()
            if self.permanent_blacklist and self.hosts.discovered and set(self.hosts.discovered) <= set(blacklisted):
                raise ElasticError(
                    f"every host is blacklisted after failures ({', '.join(blacklisted)}), for good without "
                    "--blacklist-cooldown-range: no host is left to train on"
                )
            if time.monotonic() >= deadline:
                raise ElasticError(
                    f"timed out after {self.timeout:g} s (--elastic-timeout) waiting for {needed} slots "
                    f"(-np/--min-np): {needed - count} missing; available: {_describe(available) or 'none'}"
                    + (f"; blacklisted after failures: {', '.join(blacklisted)}" if blacklisted else "")
                )
            time.sleep(POLL_SECONDS)

    def run_generation(self, assignment, generation):
        num_proc = sum(slots for _, slots in assignment)
        env = dict(self.env)
        env[protocol.JOB_ID_VARIABLE] = self.job_id
        env[protocol.GENERATION_VARIABLE] = str(generation)
        env[protocol.MIN_NP_VARIABLE] = str(self.min_np)
        env[protocol.COMMIT_KEY_VARIABLE] = self.commit_key
        if self.committed:
            env[protocol.COMMITTED_VARIABLE] = "1"
        env["HOROVOD_ELASTIC"] = "1"  # Horovod's elastic workers see it
        command, env = self.build_command(assignment, num_proc, env)
        self.log(f"generation {generation}: {num_proc} ranks on {_describe(assignment)}")
        self.job_hosts, self.blacklisted_in_job = [host for host, _ in assignment], set()
        self.recovered_hosts = set()
        job = JobWatcher(command, env)
        self.live_assignment, self.recoveries_counted = assignment, 0
        try:
            self.watch(job)
        finally:
            job.stop()
        outcome = job.finish()
        # A recovery reported just before the job ended counts too: whether the
        # supervisor looked in between must not decide the reset limit.
        self.count_recoveries(job)
        # A loss that MPI reported but the job did not recover from (the recovery in
        # process failed, or the job ended first): a lost host, as if mpirun had said so.
        unrecovered = job.hosts_mpi_lost() - self.recovered_hosts
        if unrecovered and not outcome.finished:
            outcome.peer_lost = True
            outcome.blamed |= unrecovered
        return outcome

    def count_recoveries(self, job):
        """Take the job's recoveries in process not counted yet (the survivors went on)."""
        while self.recoveries_counted < len(job.recoveries):
            self.live_assignment = self.recovered(self.live_assignment, job.recoveries[self.recoveries_counted])
            self.recoveries_counted += 1

    def watch(self, job):
        notified = None
        while job.process.poll() is None:
            time.sleep(POLL_SECONDS)
            if job.first_exit_report is not None and (
                time.monotonic() - job.first_exit_report > job.end_grace(self.live_assignment)
            ):
                self.log("mpirun did not end after its ranks left; stopping it")
                return
            self.count_recoveries(job)
            assignment = self.live_assignment
            num_proc = sum(slots for _, slots in assignment)
            try:
                self.hosts.refresh()
            except host_discovery.DiscoveryError as error:
                self.log(f"warning: {error}")  # transient: the job goes on with its hosts
                continue
            wanted = host_discovery.assign(self.hosts.available(), self.max_np)
            if sum(s for _, s in wanted) < self.min_np:
                wanted = []
            if dict(wanted) == dict(assignment) or wanted == notified or not job.all_ready(num_proc):
                continue
            current = dict(assignment)
            removed = any(dict(wanted).get(host, 0) < slots for host, slots in current.items())
            self.log(
                f"hosts changed ({_describe(wanted) or 'too few slots'}): asking the ranks to stop at their next commit"
            )
            job.signal(signal.SIGUSR2 if removed else signal.SIGUSR1)
            notified = wanted


def _session_members(session):
    """The processes of a session, from /proc (none where there is no /proc)."""
    members = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # not a process, or gone
        if int(fields[3]) == session and int(entry) != os.getpid():
            members.append(int(entry))
    return members


def _describe(hosts):
    return ",".join(f"{host}:{slots}" for host, slots in hosts)


class Stopped(BaseException):
    """lockstep-run got SIGTERM or SIGHUP: the job is stopped on the way out. A
    BaseException, so that no `except Exception` on the way swallows it."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop_on_signal(signum, _frame):
    for other in (signal.SIGTERM, signal.SIGHUP):  # a second one must not cut the cleanup short
        signal.signal(other, signal.SIG_IGN)
    raise Stopped(signum)


def supervise(args, env, build_command, discover=None):
    """Run the elastic job; the exit status for lockstep-run."""
    supervisor = Supervisor(args, env, build_command, discover=discover)
    # Without handlers, SIGTERM or SIGHUP would end lockstep-run and leave mpirun running.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_on_signal)
    try:
        return supervisor.run()
    except (ElasticError, host_discovery.DiscoveryError) as error:
        print(f"lockstep-run: error: {error}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:  # the running job was stopped on the way out
        print("lockstep-run: interrupted", file=sys.stderr, flush=True)
        return 130
    except Stopped as stopped:
        print(f"lockstep-run: stopped by {stopped}; the job was ended", file=sys.stderr, flush=True)
        return 128 + stopped.signum
