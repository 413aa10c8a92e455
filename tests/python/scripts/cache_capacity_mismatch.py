"""Ranks configured with different response cache capacities: negotiation's bit
vectors would differ in length (undefined for an allreduce), so init must fail with
a clear error on every rank instead of hanging or corrupting cycles."""

import os

os.environ["LOCKSTEP_CACHE_CAPACITY"] = "64" if os.environ["OMPI_COMM_WORLD_RANK"] == "1" else "1024"

import lockstep.numpy as hvd  # noqa: E402 (the setting must come first)

rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
try:
    hvd.init()
except ValueError as error:  # InvalidArgumentError is also a ValueError
    assert "LOCKSTEP_CACHE_CAPACITY" in str(error), error
    print(f"rank {rank}: refused: {error}", flush=True)
    print(f"rank {rank}: ALL CHECKS PASSED", flush=True)
else:
    print(f"rank {rank}: UNEXPECTED: init succeeded", flush=True)
