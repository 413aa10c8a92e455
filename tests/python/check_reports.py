"""The harness's side of named checks (scripts/checks.py): which checks a rank script
has, read from its source, and each check's verdict from a job's output.

A check passes only if it reported `ok` on every rank and never FAILED, and the job
is sound: it reported no check that was not collected or not selected, and, unless
a failed or silent check explains it, it finished on every rank with exit status 0
in time. A check that never reported on a rank fails, naming the rank.
"""

import ast
import re
from collections import defaultdict
from pathlib import Path

RESULT = re.compile(r"^LOCKSTEP-CHECK rank=(\d+) (ok|FAILED) ([A-Za-z0-9_.\-]+)(?:: (.*))?$", re.M)
TRACE = re.compile(r"^LOCKSTEP-CHECK-TRACE rank=(\d+) ([A-Za-z0-9_.\-]+) \|(?: (.*))?$", re.M)
FINISHED = "ALL CHECKS PASSED"
# The end of the output kept in a verdict about the whole job.
TAIL_LINES = 40


class CheckCollectionError(Exception):
    pass


def collect_check_names(paths):
    """The names of the checks that `paths` run, in order of appearance: the string
    literal or the check_ function (prefix dropped) first in each check(...) call, in
    files that import check from checks."""
    names = []
    for path in paths:
        for name in _names_in(Path(path)):
            if name not in names:
                names.append(name)
    if not names:
        raise CheckCollectionError(f"{', '.join(map(str, paths))}: no check(...) calls: a run must check something")
    return names


def _names_in(path):
    tree = ast.parse(path.read_text(), str(path))
    imported = any(
        isinstance(node, ast.ImportFrom) and node.module == "checks" and any(a.name == "check" for a in node.names)
        for node in ast.walk(tree)
    )
    if not imported:
        return []
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    calls = sorted((n for n in calls if n.func.id == "check"), key=lambda n: (n.lineno, n.col_offset))
    return [_name_of(call, path) for call in calls]


def _name_of(call, path):
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    # A check_ function named in the call (runs name it after the function too).
    function = first.id if isinstance(first, ast.Name) else getattr(first, "attr", "")
    if function.startswith("check_"):
        return function.removeprefix("check_")
    raise CheckCollectionError(f"{path}:{call.lineno}: check(...) needs a literal name or a check_ function first")


class CheckReports:
    """The checks' reports in one job's output (an mpi_harness.MpiRun)."""

    def __init__(self, run, num_ranks, collected, selected):
        self.run, self.num_ranks = run, num_ranks
        self.collected, self.selected = list(collected), list(selected)
        self.results = {}  # name -> rank -> [reason, or None for ok]
        # mpirun (Open MPI 4.1's above all) can join two ranks' reports on one line.
        stdout = run.stdout.replace("LOCKSTEP-CHECK", "\nLOCKSTEP-CHECK")
        for rank, status, name, reason in RESULT.findall(stdout):
            reports = self.results.setdefault(name, defaultdict(list))[int(rank)]
            reports.append(None if status == "ok" else reason or "(no reason given)")
        self.traces = defaultdict(list)  # (name, rank) -> lines
        for rank, name, line in TRACE.findall(stdout):
            self.traces[(name, int(rank))].append(line)

    def failure_of(self, name):
        """Why check `name` failed in this job, or None if it passed."""
        stray = self._stray_reports()
        if stray:
            return f"the job reported {stray}\n{self._job_tail()}"
        own = self._problems(name)
        if own:
            return f"check {name!r} failed:\n" + "\n".join(own) + self._context(name)
        unexplained = not any(self._problems(other) for other in self.selected)
        if unexplained and not self._job_finished():
            return f"check {name!r} passed on every rank, but the job did not finish cleanly:\n{self._job_tail()}"
        return None

    def _stray_reports(self):
        unknown = sorted(set(self.results) - set(self.collected))
        if unknown:
            return f"checks pytest did not collect: {unknown} (a name must be literal in its check(...) call)"
        unselected = sorted(set(self.results) - set(self.selected))
        if unselected:
            return f"checks that were not selected: {unselected}"
        return ""

    def _problems(self, name):
        lines = []
        for rank in range(self.num_ranks):
            reasons = self.results.get(name, {}).get(rank, [])
            if not reasons:
                lines.append(f"rank {rank}: never reported (the job ended, or hung, before it did)")
            for reason in filter(None, reasons):
                trace = "\n".join(f"    {line}" for line in self.traces[(name, rank)])
                lines.append(f"rank {rank}: FAILED: {reason}\n{trace}".rstrip())
        return lines

    def _context(self, name):
        failed_before = [other for other in self.selected if other != name and self._problems(other)]
        context = f"\nother checks that did not pass in this job: {failed_before}" if failed_before else ""
        if any(not self.results.get(name, {}).get(rank) for rank in range(self.num_ranks)):
            context += f"\n{self._job_tail()}"
        return context

    def _job_finished(self):
        run = self.run
        finished = all(f"rank {rank}: {FINISHED}" in run.stdout for rank in range(self.num_ranks))
        return finished and not run.timed_out and run.returncode == 0

    def _job_tail(self):
        run = self.run
        status = "timed out" if run.timed_out else f"exit status {run.returncode}"
        out = "\n".join(run.stdout.splitlines()[-TAIL_LINES:])
        err = "\n".join(run.stderr.splitlines()[-TAIL_LINES:])
        return (
            f"{' '.join(map(str, run.command))}\n{status} after {run.elapsed:.1f} s\n"
            f"--- the end of stdout ---\n{out}\n--- the end of stderr ---\n{err}"
        )
