"""The binding's additions for GPU tensors, checked with host tensors (they need no
GPU): OpSpec.stream through submit() and run(), the `stream` argument of the
synchronous allreduce's door, Result.device/data_ptr/nbytes, gpu_stream() before any
GPU op."""

import ctypes

import numpy as np
from rank_checks import assert_equal, run_main

import lockstep.numpy as hvd
from lockstep import _core


def address(array):
    return array.__array_interface__["data"][0]


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    data = np.full(4, rank + 1, np.int32)
    out = np.zeros(4, np.int32)
    expected = np.full(4, size * (size + 1) // 2, np.int32)

    def allreduce_spec(name):
        spec = _core.OpSpec()
        spec.op, spec.name, spec.dtype, spec.shape = _core.OpType.ALLREDUCE, name, _core.DataType.INT32, [4]
        spec.input, spec.output, spec.reduce_op = address(data), address(out), _core.ReduceOp.SUM
        return spec

    spec = allreduce_spec("api.submit")
    assert spec.stream == 0, "OpSpec.stream defaults to the legacy default stream"
    spec.stream = 0  # ignored for host tensors
    (handle,) = _core.submit([spec])
    _core.wait(handle)
    assert_equal(out, expected, "submit with a stream")
    out[:] = 0
    _core.run(spec=allreduce_spec("api.run"))
    assert_equal(out, expected, "run by keyword")
    out[:] = 0
    _core.run_allreduce("api.door", _core.DataType.INT32, [4], address(data), address(out), hvd.Sum, 1.0, 1.0, 0, -1, 0)
    assert_equal(out, expected, "run_allreduce with a stream argument")

    spec.stream = 0xDEAD0
    assert spec.stream == 0xDEAD0, "OpSpec.stream keeps a cudaStream_t as an integer"

    # A core-allocated host result: device -1, its address and size, and the buffer
    # protocol still works.
    rows = np.arange(3 * (rank + 1), dtype=np.float64).reshape(rank + 1, 3)
    gather = _core.OpSpec()
    gather.op, gather.name, gather.dtype = _core.OpType.ALLGATHER, "api.allgather", _core.DataType.FLOAT64
    gather.shape, gather.input = [rank + 1, 3], address(rows)
    result = _core.run(gather)
    total_rows = size * (size + 1) // 2
    assert result.device == -1, f"host result on device {result.device}"
    assert result.nbytes == total_rows * 3 * 8, f"nbytes {result.nbytes}"
    assert result.data_ptr != 0
    through_pointer = np.ctypeslib.as_array(
        ctypes.cast(result.data_ptr, ctypes.POINTER(ctypes.c_double)), shape=(total_rows * 3,)
    )
    through_buffer = np.frombuffer(memoryview(result), np.float64)
    assert_equal(through_pointer, through_buffer, "data_ptr and the buffer protocol see the same bytes")
    expected_rows = np.concatenate([np.arange(3 * (r + 1), dtype=np.float64) for r in range(size)])
    assert_equal(through_buffer, expected_rows, "allgather result")

    assert _core.gpu_stream(0) == 0 and _core.gpu_stream(0, process_set_id=0) == 0, "no GPU stream before a GPU op"
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
