"""Localizes the SIGSEGV of gpu_jax_errors.py: one step per job, a marker before and
after it, and Python's faulthandler re-armed after hvd.init() (MPI_Init installs
Open MPI's SIGSEGV handler over PYTHONFAULTHANDLER's, which prints no Python stack).

  tools/lent_gpu/probes/run.sh runs every step (after tools/gpu_machine.sh build); by hand:
  mpirun -np N bash -c 'export NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK; exec "$@"' x \
      python3 tools/lent_gpu/probes/probe_jax_errors.py STEP [--allow-cpu]
STEP: refuse (1 rank ok: CUDA handler returns an ffi::Error, no negotiation, no NCCL)
      warm | trace | b2b | bad | uneven | all
"""

import faulthandler
import sys
import time

import jax
import jax.numpy as jnp
import jax_errors as s
import numpy as np

import lockstep.jax as hvd

T0 = time.monotonic()


def mark(rank, text):
    print(f"rank {rank}: {time.monotonic() - T0:7.3f}s {text}", flush=True)


def main():
    step = sys.argv[1]
    hvd.init()
    faulthandler.enable(all_threads=True)  # after MPI_Init: ours, not Open MPI's
    r, n = hvd.rank(), hvd.size()
    mark(r, f"init done, backend {jax.default_backend()}")

    def run(name, fn):
        mark(r, f"BEGIN {name}")
        try:
            fn()
        except Exception as error:  # noqa: BLE001 - report and go on
            mark(r, f"RAISED {name}: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
        else:
            mark(r, f"END {name}")

    def warm():  # creates lockstep's stream and NCCL communicator with one plain call
        out = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum, name="probe.warm"))(jnp.ones(4))
        assert np.asarray(out).tolist() == [float(n)] * 4

    def refuse():  # core refuses at enqueue -> CudaCollective's catch -> ffi::Error
        flags = jnp.array([True, False])
        jax.block_until_ready(jax.jit(lambda x: hvd.allreduce(x, op=hvd.Average, name="probe.bool"))(flags))

    def bad():
        f = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum, name="probe.bad"))
        jax.block_until_ready(f(jnp.ones(3 + r, jnp.float32)))

    def uneven():
        f = jax.jit(lambda x: hvd.allgather(x, name="probe.uneven"))
        jax.block_until_ready(f(jnp.ones((1 + r, 2))))

    steps = {
        "refuse": [("refuse", refuse), ("warm", warm)],
        "warm": [("warm", warm)],
        "trace": [("trace", lambda: s.check_trace_time_errors(r, n))],
        "b2b": [("b2b", lambda: s.check_back_to_back_dispatch(r, n))],
        "bad": [("warm", warm), ("bad", bad), ("warm-after", warm)],
        "uneven": [("warm", warm), ("uneven", uneven), ("warm-after", warm)],
        "all": [
            ("trace", lambda: s.check_trace_time_errors(r, n)),
            ("b2b", lambda: s.check_back_to_back_dispatch(r, n)),
            ("mismatch", lambda: s.check_mismatched_shapes_fail_everywhere(r, n)),
            ("b2b-again", lambda: s.check_back_to_back_dispatch(r, n)),
        ],
    }[step]
    for name, fn in steps:
        run(name, fn)
    mark(r, "shutdown")
    hvd.shutdown()
    mark(r, "DONE")


if __name__ == "__main__":
    main()
