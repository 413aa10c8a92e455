"""lockstep.jax errors on a GPU under mpirun (tests/gpu/test_gpu_jax.py): the CPU
suite's checks (tests/python/scripts/jax_errors.py) with arrays on the GPU, so the
CUDA handler's failure paths run: mismatched shapes inside jit fail on every rank
with a clear error and later GPU collectives still work; a result that does not fit
the traced shape is refused; argument errors at trace time; many jitted executions
dispatched back to back, each with independent collectives, complete in order (the
CUDA handler blocks XLA's thread until each collective is queued). The timeline
check of unused results runs only on CPU (the GPU path records no timeline phases).
`--allow-cpu` runs the script on JAX's CPU backend.
"""

import sys

import jax
import jax_errors as cpu_suite
from rank_checks import run_main

import lockstep.jax as hvd

ON_GPU = "--allow-cpu" not in sys.argv


def main():
    if ON_GPU:
        assert jax.default_backend() == "gpu", f"JAX's default backend is {jax.default_backend()}, not gpu"
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    cpu_suite.check_trace_time_errors(rank, size)
    cpu_suite.check_back_to_back_dispatch(rank, size)
    if not ON_GPU:
        cpu_suite.check_each_execution_runs_a_collective_once(rank, size)
    cpu_suite.check_mismatched_shapes_fail_everywhere(rank, size)
    cpu_suite.check_back_to_back_dispatch(rank, size)  # the GPU collectives still work after the failures
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
