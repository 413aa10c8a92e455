"""Named checks for test_harness.py: one passes, one fails on rank 1 only, one runs
after that failure. LOCKSTEP_TEST_CASE=rank_one_exits makes rank 1 exit, status 0,
inside the first check, before it reports."""

import os

from checks import check
from rank_checks import run_main, world_rank


def check_passes():
    if os.environ.get("LOCKSTEP_TEST_CASE") == "rank_one_exits" and world_rank() == 1:
        os._exit(0)
    assert 1 + 1 == 2


def check_fails_on_rank_one():
    assert world_rank() != 1, f"rank {world_rank()} disagrees"


def main():
    check(check_passes)
    check(check_fails_on_rank_one)
    check("runs_after_a_failure", print, "a later check ran")


if __name__ == "__main__":
    run_main(main)
