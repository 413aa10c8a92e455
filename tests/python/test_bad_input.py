"""Every public function of lockstep.numpy and lockstep.torch with each argument
replaced by bad values: clear errors of the library's kinds, never a crash or hang
(tests/python/scripts/bad_input.py)."""

import pytest
from mpi_harness import DESYNC_LIMIT, run_ranks


@pytest.mark.parametrize("frontend", ["numpy", "torch"])
def test_bad_arguments_to_every_public_function(frontend, num_ranks):
    run = run_ranks("bad_input.py", num_ranks, timeout=240, args=[frontend], env=DESYNC_LIMIT)
    run.assert_all_ranks_passed(num_ranks)
    assert f"{frontend}: " in run.stdout and "results checked" in run.stdout, run.describe()
