"""Runs several torch check modules in one mpirun job, so the suite pays for
starting torch on every rank only once per job:

    mpirun -np 2 python torch_suite.py collectives autograd

Each module torch_<name>.py provides run(rank, size) and may provide
before_init() for checks that need lockstep not yet initialized.
"""

import importlib
import sys

import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
from rank_checks import run_main

import lockstep.torch as hvd


def main():
    modules = [importlib.import_module(f"torch_{name}") for name in sys.argv[1:]]
    if not modules:
        raise SystemExit("name at least one check module, e.g. `collectives`")
    for module in modules:
        if hasattr(module, "before_init"):
            module.before_init()
    hvd.init()
    for module in modules:
        module.run(hvd.rank(), hvd.size())
    hvd.barrier()
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
