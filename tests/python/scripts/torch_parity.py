"""Runs named Horovod-parity checks in one mpirun job:

    mpirun -np 2 python torch_parity.py scaling adasum_allreduce

The pytest suite runs every check in one job per rank count: torch's start-up costs
more than most checks. A check that fails ends the job (its rank exits at once and
mpirun stops the others), so it cannot leave later checks hanging or running on
desynchronised ranks; each passed check is printed, so a failure shows which one."""

import sys

import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
import torch_parity_collectives
import torch_parity_porting
import torch_parity_training
from rank_checks import run_main

import lockstep.torch as hvd

CHECKS = {**torch_parity_collectives.CHECKS, **torch_parity_training.CHECKS, **torch_parity_porting.CHECKS}


def main():
    names = sys.argv[1:]
    unknown = [name for name in names if name not in CHECKS]
    if unknown or not names:
        raise SystemExit(f"unknown checks {unknown}; choose from {sorted(CHECKS)}")
    hvd.init()
    for name in names:
        CHECKS[name](hvd.rank(), hvd.size())
        print(f"rank {hvd.rank()}: {name} passed", flush=True)
    hvd.barrier()
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
