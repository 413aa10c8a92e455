"""Runs the Horovod-parity checks in one mpirun job, each a named check
(scripts/checks.py); LOCKSTEP_CHECKS picks some:

    LOCKSTEP_CHECKS=scaling,adasum_allreduce mpirun -np 2 python torch_parity.py

The pytest suite runs every check in one job per rank count: torch's start-up costs
more than most checks. A check that fails on one rank goes on to the next; the
others' collectives fail after the stall shutdown time the test sets
(DESYNC_LIMIT) instead of hanging."""

import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
import torch_parity_collectives
import torch_parity_porting
import torch_parity_training
from rank_checks import run_main

import lockstep.torch as hvd

MODULES = (torch_parity_collectives, torch_parity_training, torch_parity_porting)


def main():
    hvd.init()
    for module in MODULES:
        module.run(hvd.rank(), hvd.size())
    hvd.barrier()
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
