"""Named checks in rank scripts: each reports itself, so pytest can make one test of
each (tests/python/check_plugin.py has the other side).

    check(check_allgather, rank, size)        # named "allgather" (check_ dropped)
    check("restart keeps the sets", fn, ...)  # or named by a string literal

Each call prints one line per rank, `LOCKSTEP-CHECK rank=<r> ok <name>` or
`LOCKSTEP-CHECK rank=<r> FAILED <name>: <reason>` followed by the traceback, every
line of it prefixed `LOCKSTEP-CHECK-TRACE rank=<r> <name> |` (mpirun interleaves the
ranks' output). A failed check does not end the script: it goes on to the next one,
and run_main exits non-zero at the end. LOCKSTEP_CHECKS=a,b runs only those checks
(the harness sets it when `pytest -k` selects some). The names must be literal in
the call, as pytest reads them from the source to make the tests before any rank runs.
"""

import os
import re
import sys
import traceback

NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
# Lines pytest parses; check_reports.py holds the same two prefixes.
RESULT_PREFIX = "LOCKSTEP-CHECK"
TRACE_PREFIX = "LOCKSTEP-CHECK-TRACE"

_failed = []


def check(name_or_function, *args, **kwargs):
    """Run one named check (a function called with args) unless LOCKSTEP_CHECKS leaves
    it out; report how it went. Returns the function's result, None if it failed."""
    if not __debug__:
        raise SystemExit("rank checks are assert statements: run without python -O / PYTHONOPTIMIZE")
    function, name = _function_and_name(name_or_function, args)
    if function is not name_or_function:
        args = args[1:]
    if not _selected(name):
        return None
    try:
        result = function(*args, **kwargs)
    except BaseException as error:
        _report_failure(name, error)
        if not isinstance(error, Exception):
            raise  # SystemExit, KeyboardInterrupt: the script must end
        return None
    _print(f"{RESULT_PREFIX} rank={_rank()} ok {name}")
    return result


def failed_checks():
    """The names of the checks that failed on this rank so far."""
    return list(_failed)


def _function_and_name(name_or_function, args):
    if isinstance(name_or_function, str):
        name, function = name_or_function, args[0] if args else None
    else:
        function = name_or_function
        name = function.__name__.removeprefix("check_")
    if not callable(function) or not NAME.match(name):
        raise ValueError(f"check({name_or_function!r}, ...): needs a name of [A-Za-z0-9_.-] and a function")
    return function, name


def _selected(name):
    wanted = os.environ.get("LOCKSTEP_CHECKS", "")
    return not wanted or name in wanted.split(",")


def _report_failure(name, error):
    _failed.append(name)
    reason = " ".join(f"{type(error).__name__}: {error}".split())[:300]
    lines = [f"{RESULT_PREFIX} rank={_rank()} FAILED {name}: {reason}"]
    prefix = f"{TRACE_PREFIX} rank={_rank()} {name} |"
    # From the check's own frame on: this module's frame says nothing.
    for text in traceback.format_exception(type(error), error, error.__traceback__.tb_next):
        lines.extend(f"{prefix} {line}" for line in text.rstrip("\n").split("\n"))
    _print("\n".join(lines))


def _rank():
    return os.environ.get("OMPI_COMM_WORLD_RANK", "?")


def _print(text):
    # One write() for the text and its newline: mpirun forwards output at write
    # granularity, and print() writes them apart, so two ranks' lines could be joined.
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
