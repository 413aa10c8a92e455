"""A GPU tensor where GPU collectives cannot run fails on every rank at submission
with a message naming what is missing, and the job keeps working afterwards."""

import numpy as np
from rank_checks import assert_equal, expect_error, run_main

import lockstep.numpy as hvd
from lockstep import _core


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    problem = hvd.nccl_info()["problem"]
    assert problem, "run only where GPU collectives cannot run"
    data = np.zeros(4, np.float32)
    address = data.__array_interface__["data"][0]
    spec = _core.OpSpec()
    spec.op, spec.name, spec.dtype, spec.shape = _core.OpType.ALLREDUCE, "gpu.tensor", _core.DataType.FLOAT32, [4]
    spec.input, spec.output, spec.reduce_op, spec.device = address, address, _core.ReduceOp.SUM, 0
    expect_error(hvd.InvalidArgumentError, ["is on GPU 0, but", problem], _core.submit, [spec])
    assert_equal(
        hvd.allreduce(np.full(3, rank, np.int32), op=hvd.Sum),
        np.full(3, sum(range(size)), np.int32),
        "a CPU allreduce after the refused GPU tensor",
    )
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
