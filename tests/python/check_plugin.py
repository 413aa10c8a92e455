"""pytest's side of named checks (scripts/checks.py): one test per check of a rank
script, one job per script and parameters.

    @pytest.mark.rank_checks("allreduce_all.py")
    def test_allreduce(num_ranks, rank_check):
        run = rank_check.run(num_ranks, env={...})  # fails unless this check passed
        assert "..." in run.stderr, run.describe()   # what the test asks of the whole job

The marker names the script to launch, then any other files of scripts/ whose
check(...) calls the script runs; without=[names] leaves checks out of this test
and its job (for a launch that would not run them), only=[names] keeps just those.
pytest reads the check names from those files and makes one test of each (its id
ends in the check's name, so `-k` selects checks). The first of a test's checks to
run launches the job, for the checks that collection left selected only
(LOCKSTEP_CHECKS), and the others read its output: a test whose other parameters
differ gets its own job. rank_check.run_by launches the job some other way (a
pretend cluster, lockstep-run), and a test that compares jobs launches each (its
run calls, in the same order in each of its tests): its check must pass in every
one. A check that failed names its ranks and their tracebacks; check_reports.py
says when a check passes.
"""

from dataclasses import dataclass, field

import pytest
from check_reports import CheckReports, collect_check_names
from mpi_harness import SCRIPTS_DIR, run_ranks

MARKER = "rank_checks"
FIXTURE = "rank_check"
_GROUPS = pytest.StashKey[dict]()


@dataclass
class _Group:
    """The tests (checks) of one test function and parameters, and their one job."""

    selected: list = field(default_factory=list)
    remaining: int = 0
    launches: list = field(default_factory=list)  # how each of its jobs was launched, in order
    runs: list = field(default_factory=list)
    tmp_path: object = None


def configure(config):
    config.addinivalue_line(
        "markers",
        f"{MARKER}(script, *sources, without=(), only=()): one test per check(...) of a rank script (check_plugin.py)",
    )
    config.stash[_GROUPS] = {}


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None:
        return
    if FIXTURE not in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: @{MARKER} needs the {FIXTURE} fixture")
    names = collect_check_names([SCRIPTS_DIR / source for source in marker.args])
    without, only = marker.kwargs.get("without", ()), marker.kwargs.get("only", ())
    for keyword, listed in (("without", without), ("only", only)):
        unknown = set(listed) - set(names)
        if unknown:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: {keyword}= names no check of its script: {unknown}")
    kept = [name for name in names if name not in without and (not only or name in only)]
    if not kept:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: without= and only= leave no check to run")
    script = marker.args[0]
    metafunc.parametrize(FIXTURE, [(script, tuple(names), name) for name in kept], ids=kept, indirect=True)


def pytest_collection_finish(session):
    groups = session.config.stash[_GROUPS]
    for item in session.items:
        key = _group_key(item)
        if key is not None:
            group = groups.setdefault(key, _Group())
            group.selected.append(item.callspec.params[FIXTURE][2])
            group.remaining += 1


def _group_key(item):
    params = getattr(getattr(item, "callspec", None), "params", {})
    if FIXTURE not in params:
        return None
    others = tuple(sorted((key, repr(value)) for key, value in params.items() if key != FIXTURE))
    return (str(item.path), item.originalname, others)


@pytest.fixture
def rank_check(request, built_extension, tmp_path_factory):
    """This test's check (see the module's docstring); parametrized by the marker."""
    script, collected, name = request.param
    group = request.config.stash[_GROUPS][_group_key(request.node)]
    yield RankCheck(script, collected, name, group, tmp_path_factory)
    group.remaining -= 1
    if group.remaining == 0:
        group.runs = None  # the last of its checks: the output is no longer needed


class RankCheck:
    def __init__(self, script, collected, name, group, tmp_path_factory):
        self.script, self.collected, self.name = script, collected, name
        self._group, self._tmp_path_factory = group, tmp_path_factory
        self._launched = 0  # this test's run_by calls so far

    @property
    def tmp_path(self):
        """A directory shared by the checks of one job (tmp_path is one test's own)."""
        if self._group.tmp_path is None:
            self._group.tmp_path = self._tmp_path_factory.mktemp(self.script.removesuffix(".py"))
        return self._group.tmp_path

    def run(self, num_ranks, timeout=120, env=None, args=(), mpirun_args=()):
        """A job of this test's checks launched by mpi_harness.run_ranks (see run_by)."""
        how = {"args": [str(a) for a in args], "mpirun_args": list(mpirun_args)}
        return self.run_by(num_ranks, run_ranks, self.script, num_ranks, timeout, env=env, **how)

    def run_by(self, num_ranks, launch, *args, env=None, **kwargs):
        """The job launch(*args, env=env, **kwargs) runs (it returns an mpi_harness.MpiRun;
        env gains LOCKSTEP_CHECKS when collection left checks out), launched by the first
        of this test's checks to get here, after failing this test unless its check
        passed in it. A test may call it more than once, for one job each, in the same
        order and alike in each of its checks' tests."""
        group, index = self._group, self._launched
        self._launched += 1
        how = (num_ranks, launch, repr(args), sorted((env or {}).items()), repr(sorted(kwargs.items())))
        if index == len(group.launches):
            job_env = dict(env or {})
            if set(group.selected) != set(self.collected):
                job_env["LOCKSTEP_CHECKS"] = ",".join(group.selected)
            group.launches.append(how)
            group.runs.append(launch(*args, env=job_env, **kwargs))
        launched, run = group.launches[index], group.runs[index]
        assert launched == how, f"the checks of a job must launch it alike: {launched} != {how}"
        failure = CheckReports(run, num_ranks, self.collected, group.selected).failure_of(self.name)
        if failure:
            pytest.fail(f"in this test's job {index + 1}: {failure}" if index else failure, pytrace=False)
        return run
