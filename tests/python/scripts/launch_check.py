"""init() under a launcher that does not belong to lockstep's MPI, or under plain python
when the environment says a launcher started it: every process must fail at init()
with a message naming both sides, never hang or train as N separate one-rank jobs."""

import sys
import time

import lockstep.numpy as hvd

try:
    hvd.init()
except Exception as error:  # the type is whatever lockstep raises for a failed init
    print(f"init failed: {type(error).__name__}: {error}", flush=True)
    # The launcher ends the job when the first process exits; the pause lets every
    # other process reach init() and report, so the test sees each one refuse.
    time.sleep(5)
    sys.exit(3)
print(f"init succeeded: rank {hvd.rank()} of {hvd.size()}", flush=True)
