"""Every public function of lockstep.numpy and lockstep.torch with each argument
replaced by bad values: clear errors of the library's kinds, never a crash or hang
(tests/python/scripts/bad_input.py)."""

import pytest
from mpi_harness import DESYNC_LIMIT


@pytest.mark.parametrize("frontend", ["numpy", "torch"])
@pytest.mark.rank_checks("bad_input.py")
def test_bad_arguments_to_every_public_function(frontend, num_ranks, rank_check):
    run = rank_check.run(num_ranks, timeout=240, args=[frontend], env=DESYNC_LIMIT)
    if rank_check.name == "bad_arguments_to_every_public_function":
        assert f"{frontend}: " in run.stdout and "results checked" in run.stdout, run.describe()
