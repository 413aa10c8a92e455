"""Instructions per small synchronous op on the calling thread, under callgrind.

Wall time on a shared 2-core machine varies by 2x between runs; instruction counts
do not. Each variant runs at 1 rank (flat combining runs the cycle on the calling
thread) for 1,000 and for 3,000 ops; the difference divided by 2,000 is the cost of
one op, start-up and shutdown cancelling out. Compare two trees with PYTHONPATH:

    python benchmarks/studies/callgrind_small_op.py named unnamed
    PYTHONPATH=/path/to/other/tree/python python benchmarks/studies/callgrind_small_op.py named
"""

import os
import re
import subprocess
import sys
import tempfile

VARIANTS = {
    "named": "hvd.allreduce(x, name='a')",
    "named-sum": "hvd.allreduce(x, name='a', op=hvd.Sum)",
    "in-place": "hvd.allreduce_(x, name='a', op=hvd.Sum)",
    "unnamed": "hvd.allreduce(x)",
    "binding": "core.run_allreduce('a', F32, (1,), address, out_address, hvd.Sum, 1.0, 1.0, 0, -1, 0)",
    # lockstep.torch (the program below imports it as `hvd` instead of lockstep.numpy)
    "torch-named-sum": "hvd.allreduce(t, name='a', op=hvd.Sum)",
    "torch-in-place": "hvd.allreduce_(t, name='a', op=hvd.Sum)",
    "torch-empty-like": "torch.empty_like(t)",
}

PROGRAM = """
import sys
import numpy as np
{frontend}
from lockstep import _core as core
hvd.init()
x = np.ones(1, np.float32)
out = np.empty_like(x)
address, out_address = core.buffer_address(x), core.buffer_address(out)
F32, SUM = core.DataType.FLOAT32, core.ReduceOp.SUM
{torch_setup}
for _ in range(int(sys.argv[1])):
    {call}
hvd.shutdown()
"""


def main_thread_instructions(name, count, workdir):
    call = VARIANTS[name]
    script = os.path.join(workdir, "op.py")
    with open(script, "w") as stream:
        torch = name.startswith("torch")
        stream.write(
            PROGRAM.format(
                call=call,
                frontend="import torch\nimport lockstep.torch as hvd" if torch else "import lockstep.numpy as hvd",
                torch_setup="t = torch.ones(1, dtype=torch.float32)" if torch else "",
            )
        )
    out = os.path.join(workdir, f"callgrind.{count}")
    subprocess.run(
        ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}"]
        + [sys.executable, script, str(count)],
        check=True,
        capture_output=True,
    )
    with open(out + "-01") as stream:  # thread 1: the caller
        return int(re.search(r"^summary: (\d+)", stream.read(), re.M).group(1))


def main():
    names = sys.argv[1:] or list(VARIANTS)
    for name in names:
        with tempfile.TemporaryDirectory() as workdir:
            low = main_thread_instructions(name, 1000, workdir)
            high = main_thread_instructions(name, 3000, workdir)
        print(f"{name}: {(high - low) / 2000 / 1000:.1f}k instructions per op ({VARIANTS[name]})", flush=True)


if __name__ == "__main__":
    main()
