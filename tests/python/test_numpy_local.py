"""Single-process checks of the Python layer that need no MPI job: naming, the
handle table, argument validation and array conversion. (MPI is never
initialized here: importing lockstep does not start it.)"""

import sys
import warnings

import ml_dtypes
import numpy as np
import pytest

import lockstep
import lockstep.numpy as hvd
from lockstep import _core
from lockstep.common import validation
from lockstep.common.handles import HandleTable, PendingOp
from lockstep.common.host_arrays import as_array, tensor_ref
from lockstep.common.naming import OpNamer
from lockstep.common.ops import handle_average_backwards_compatibility, to_core_reduce_op


def test_automatic_names_count_per_kind_and_call_site_and_restart():
    namer = OpNamer()

    def submit(kind, name=None):  # one call site: the line below
        return namer.name_for(kind, name)

    site = f"test_numpy_local.py:{submit.__code__.co_firstlineno + 1}"
    names = [submit("local-test-a"), submit("local-test-b"), submit("local-test-a"), submit("local-test-a", "mine")]
    assert names == [
        f"local-test-a.auto.{site}.0",
        f"local-test-b.auto.{site}.0",
        f"local-test-a.auto.{site}.1",
        "mine",
    ]
    elsewhere = namer.name_for("local-test-a", None)
    assert elsewhere == f"local-test-a.auto.test_numpy_local.py:{sys._getframe().f_lineno - 1}.0"
    namer.restart()
    assert submit("local-test-a") == f"local-test-a.auto.{site}.0"
    # The TensorFlow kernels' counters live in the core, in their own namespace.
    assert _core.auto_name("local-test-a") == "local-test-a.noname.0"


def test_call_sites_follow_each_code_object_and_skip_lockstep_frames():
    namer = OpNamer()

    def compiled(filename, module):
        """A function `submit(kind)` compiled from `filename` in module `module`."""
        scope = {"__name__": module, "namer": namer}
        exec(
            compile("\n\ndef submit(kind, ps=0):\n    return namer.name_for(kind, None, ps)\n", filename, "exec"), scope
        )
        return scope["submit"]

    # Code objects come and go (lambdas, exec'd cells): a cached site must never be
    # served for another code object, even one that reuses a freed one's id.
    for index in range(50):
        submit = compiled(f"/tmp/user_{index}.py", "__main__")
        assert submit("local-sites") == f"local-sites.auto.user_{index}.py:4.0"
        del submit
    # A frame in a lockstep module is skipped: the caller's line names the op.
    inner = compiled("/tmp/lockstep_inner.py", "lockstep.fake_inner")
    assert inner("local-sites") == f"local-sites.auto.test_numpy_local.py:{sys._getframe().f_lineno}.0"
    # Each process set counts on its own; a restart resets every count.
    outer = compiled("/tmp/user_ps.py", "__main__")
    assert [outer("local-sites"), outer("local-sites", 3), outer("local-sites", 3)] == [
        "local-sites.auto.user_ps.py:4.0",
        "local-sites.auto.user_ps.py:4.0",
        "local-sites.auto.user_ps.py:4.1",
    ]
    namer.restart()
    assert outer("local-sites", 3) == "local-sites.auto.user_ps.py:4.0"


def test_handle_table_issues_and_forgets_handles():
    table = HandleTable()
    first = table.add(PendingOp(core_handles=[7], finish=lambda results: results, keepalive=()))
    second = table.add(PendingOp(core_handles=[8, 9], finish=lambda results: results, keepalive=()))
    assert first != second and len(table) == 2
    assert table.get(second).core_handles == [8, 9]
    assert table.pop(first).core_handles == [7]
    with pytest.raises(ValueError, match="already synchronized"):
        table.pop(first)
    with pytest.raises(TypeError, match="handle"):
        table.get("1")
    with pytest.raises(TypeError, match="handle"):
        table.get(True)


def test_average_argument_compatibility():
    assert handle_average_backwards_compatibility(None, None) == hvd.Average
    assert handle_average_backwards_compatibility(hvd.Max, None) == hvd.Max
    with pytest.warns(DeprecationWarning):
        assert handle_average_backwards_compatibility(None, True) == hvd.Average
    with pytest.warns(DeprecationWarning):
        assert handle_average_backwards_compatibility(None, False) == hvd.Sum
    with pytest.raises(ValueError, match="not both"):
        handle_average_backwards_compatibility(hvd.Sum, True)


def test_reduce_op_constants_match_horovod_and_the_core():
    assert (lockstep.Average, lockstep.Sum, lockstep.Adasum, lockstep.Min, lockstep.Max, lockstep.Product) == (
        0,
        1,
        2,
        3,
        4,
        5,
    )
    for op in (hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product):
        assert int(to_core_reduce_op(op)) == op
        assert int(to_core_reduce_op(np.int64(op))) == op
        assert int(to_core_reduce_op(to_core_reduce_op(op))) == op


@pytest.mark.parametrize(
    "op, error, fragment",
    [
        ("sum", TypeError, "op"),
        (1.0, TypeError, "op"),
        (True, TypeError, "bool"),
        (17, ValueError, "unknown reduce op"),
    ],
)
def test_bad_reduce_ops(op, error, fragment):
    with pytest.raises(error, match=fragment):
        to_core_reduce_op(op)


def test_reduce_op_restricted_to_what_the_op_supports():
    with pytest.raises(ValueError, match="reducescatter does not support reduce op Max"):
        to_core_reduce_op(hvd.Max, (hvd.Average, hvd.Sum), "reducescatter")
    # Horovod's core refuses Adasum for reducescatter with a RuntimeError; a ValueError
    # is what the other refusals raise: lockstep's error is both.
    for horovod_type in (ValueError, RuntimeError):
        with pytest.raises(horovod_type, match="reducescatter does not support reduce op Adasum"):
            to_core_reduce_op(hvd.Adasum, (hvd.Average, hvd.Sum), "reducescatter")


def core_check(op, shape=(8,), set_size=4, world_size=4, **fields):
    """The core's argument checks (lockstep.common.validation.check_op's), which need no
    running core, on a float32 spec of `op` with `fields` set."""
    spec = _core.OpSpec()
    spec.op = op
    spec.shape = list(shape)
    spec.reduce_op = _core.ReduceOp.SUM
    for field, value in fields.items():
        setattr(spec, field, value)
    _core.check_op_arguments(spec, set_size, world_size)


def test_splits_conversion_and_the_cores_checks():
    assert validation.as_splits(np.array([2, 0, 1])) == [2, 0, 1]
    assert validation.as_splits((1, 1)) == [1, 1]
    with pytest.raises(TypeError, match="splits"):
        validation.as_splits("ab")
    with pytest.raises(TypeError, match="splits"):
        validation.as_splits([1.5])
    with pytest.raises(ValueError, match="one-dimensional"):
        validation.as_splits(np.ones((2, 1), int))
    with pytest.raises(ValueError, match="64-bit"):
        validation.as_splits([2**70])
    alltoall = _core.OpType.ALLTOALL
    core_check(alltoall, shape=(3,), set_size=3, splits=[2, 0, 1])
    with pytest.raises(ValueError, match="there are 3 ranks; give one per rank"):
        core_check(alltoall, shape=(2,), set_size=3, world_size=3, splits=[1, 1])
    with pytest.raises(ValueError, match=r"splits \[1, 1\] sum to 2 but the tensor's first dimension is 3"):
        core_check(alltoall, shape=(3,), set_size=2, splits=[1, 1])
    with pytest.raises(ValueError, match="non-negative"):
        core_check(alltoall, shape=(2,), set_size=2, splits=[3, -1])
    with pytest.raises(ValueError, match="divisible"):
        core_check(alltoall, shape=(3,), set_size=2)


def test_reductions_refused_with_horovods_types():
    # Horovod's core refuses Adasum for reducescatter with a RuntimeError; a ValueError
    # is what the other refusals raise: lockstep's error is both.
    for horovod_type in (ValueError, RuntimeError, hvd.UnsupportedOperationError):
        with pytest.raises(horovod_type, match="reduce op Adasum is not supported"):
            core_check(_core.OpType.REDUCESCATTER, reduce_op=_core.ReduceOp.ADASUM)
    with pytest.raises(hvd.UnsupportedOperationError, match="reducescatter takes Average"):
        core_check(_core.OpType.REDUCESCATTER, reduce_op=_core.ReduceOp.MAX)
    # Horovod raises NotImplementedError for Adasum on a set that is not a power of 2.
    with pytest.raises(NotImplementedError, match="power-of-2 number of ranks; process set 1 has 3 ranks"):
        core_check(_core.OpType.ALLREDUCE, reduce_op=_core.ReduceOp.ADASUM, set_size=3, process_set_id=1)
    core_check(_core.OpType.ALLREDUCE, reduce_op=_core.ReduceOp.ADASUM, set_size=2, process_set_id=1)
    with pytest.raises(ValueError, match="Average is not defined for bool"):
        core_check(_core.OpType.ALLREDUCE, dtype=_core.DataType.BOOL, reduce_op=_core.ReduceOp.AVERAGE)


def test_scalar_arguments_validation():
    assert validation.as_root_rank(np.int32(1)) == 1
    with pytest.raises(TypeError, match="root_rank"):
        validation.as_root_rank(1.0)
    with pytest.raises(ValueError, match="root_rank .* 32-bit"):
        validation.as_root_rank(2**40)
    core_check(_core.OpType.BROADCAST, root_rank=1, set_size=2, world_size=2)
    with pytest.raises(ValueError, match=r"root_rank 2 is out of range: there are 2 ranks \(0..1\)"):
        core_check(_core.OpType.BROADCAST, root_rank=2, set_size=2, world_size=2)
    assert validation.as_scale_factor(2, "prescale_factor") == 2.0
    with pytest.raises(TypeError, match="prescale_factor"):
        validation.as_scale_factor(None, "prescale_factor")
    with pytest.raises(ValueError, match="finite"):
        validation.as_scale_factor(float("inf"), "prescale_factor")
    with pytest.raises(TypeError, match="name"):
        validation.check_name(b"bytes")


SUPPORTED = [
    np.uint8,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.float16,
    ml_dtypes.bfloat16,
    np.float32,
    np.float64,
    np.bool_,
]


@pytest.mark.parametrize("dtype", SUPPORTED, ids=lambda d: np.dtype(d).name)
def test_supported_arrays_are_passed_zero_copy(dtype):
    array = np.zeros((3, 2), dtype=dtype)
    assert as_array(array) is array
    ref = tensor_ref(array)
    assert ref.address == array.ctypes.data and ref.shape == (3, 2) and ref.owner is array
    assert ref.dtype.name == np.dtype(dtype).name.upper()


def test_numpy_scalars_become_zero_dimensional_arrays():
    array = as_array(np.float32(2.5))
    assert array.shape == () and array.dtype == np.float32 and array[()] == 2.5


@pytest.mark.parametrize("value", [[1, 2], 3, 2.5, "text", None, memoryview(b"ab")])
def test_non_arrays_are_type_errors(value):
    with pytest.raises(TypeError, match="numpy.ndarray or numpy scalar"):
        as_array(value)


@pytest.mark.parametrize("dtype", [np.complex64, np.uint32, np.uint64, object, "U3", ">f4"])
def test_unsupported_dtypes_list_the_supported_ones(dtype):
    with pytest.raises(TypeError, match="supported dtypes: uint8, uint16, int8, int16, int32, int64, float16"):
        as_array(np.zeros(2, dtype=dtype))


def test_non_contiguous_arrays_are_copied():
    view = np.arange(16, dtype=np.float32).reshape(4, 4)[:, 1]
    array = as_array(view)
    assert array.flags.c_contiguous and np.array_equal(array, view)
    contiguous = np.ones(3, np.float32)
    assert as_array(contiguous) is contiguous, "contiguous arrays are not copied"


def test_every_op_before_init_says_to_call_init():
    assert not hvd.is_initialized()
    for call in (hvd.rank, hvd.size, hvd.barrier, lambda: hvd.allreduce(np.ones(2, np.float32))):
        with pytest.raises(ValueError, match=r"lockstep has not been initialized; call hvd.init\(\) first"):
            call()
    with pytest.raises(hvd.LockstepError):
        hvd.local_rank()
    assert hvd.HorovodInternalError is hvd.LockstepError is _core.LockstepError
    assert issubclass(hvd.LockstepError, RuntimeError)


def test_the_synchronous_allreduce_door_checks_its_arguments():
    """_core.run_allreduce parses its arguments itself (not through pybind11): each bad
    one is a Python error, never a crash; arguments that are not plain go to the
    frontends' checker, whose errors every other entry point raises too."""
    x, out = np.ones(3, np.float32), np.empty(3, np.float32)
    f32 = _core.DataType.FLOAT32
    door = _core.run_allreduce
    with pytest.raises(TypeError, match="takes 11 positional arguments"):
        door()
    with pytest.raises(TypeError, match="DataType"):
        door("a", 3, None, x, out, hvd.Sum, 1.0, 1.0, 0, -1, 0)
    with pytest.raises(ValueError, match="contiguous"):
        door("a", f32, None, x[::2], np.empty(2, np.float32), hvd.Sum, 1.0, 1.0, 0, -1, 0)
    with pytest.raises(ValueError, match="output must have the input's size"):
        door("a", f32, None, x, np.empty(2, np.float32), hvd.Sum, 1.0, 1.0, 0, -1, 0)
    with pytest.raises(OverflowError):
        door("a", f32, None, x, out, hvd.Sum, 1.0, 1.0, 2**40, -1, 0)
    with pytest.raises(TypeError, match="shape must be a sequence"):
        door("a", f32, 3, 0, 0, hvd.Sum, 1.0, 1.0, 0, -1, 0)
    # Well-formed and plain, but before init: the core's error.
    with pytest.raises(_core.LockstepError, match="not been initialized"):
        door("a", f32, None, x, out, hvd.Sum, 1.0, 1.0, 0, -1, 0)
    with pytest.raises(_core.LockstepError, match="not been initialized"):
        door("a", f32, [3], 0, 0, hvd.Sum, 1.0, 1.0, 0, -1, 0)
    # Not plain: the checker's error, the one the frontends raise for it before init.
    for op, prescale, name in (("sum", 1.0, "a"), (hvd.Sum, "2", "a"), (hvd.Sum, 1.0, 5), (hvd.Adasum, 1.0, "a")):
        with pytest.raises(ValueError, match=r"lockstep has not been initialized; call hvd.init\(\) first"):
            door(name, f32, None, x, out, op, prescale, 1.0, 0, -1, 0)


def test_init_refuses_a_communicator():
    with pytest.raises(ValueError, match="MPI_COMM_WORLD"):
        hvd.init(comm=[0, 1])
    assert not hvd.is_initialized()


def test_fp16_compression_round_trip():
    original = np.array([1.0, -2.5, 3.0], np.float64)
    compressed, context = hvd.Compression.fp16.compress(original)
    assert compressed.dtype == np.float16
    restored = hvd.Compression.fp16.decompress(compressed, context)
    assert restored.dtype == np.float64 and np.array_equal(restored, original)
    ints = np.arange(3, dtype=np.int32)
    assert hvd.Compression.fp16.compress(ints)[0] is ints


def test_build_queries_answer_without_init_and_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(lockstep.mpi_built(), bool)


def test_error_types_are_horovods():
    """Code catching Horovod's types catches lockstep's: every core error is a
    RuntimeError (HorovodInternalError); invalid arguments are also ValueErrors."""
    assert issubclass(hvd.LockstepError, RuntimeError) and hvd.HorovodInternalError is hvd.LockstepError
    for cls in (hvd.InvalidArgumentError, hvd.UnsupportedOperationError):
        assert issubclass(cls, ValueError) and issubclass(cls, hvd.LockstepError), cls.__mro__
    assert issubclass(_core.UnimplementedError, NotImplementedError)
    assert issubclass(_core.UnimplementedError, hvd.LockstepError)
    for cls in (hvd.PreconditionError, hvd.AbortedError):
        assert issubclass(cls, hvd.LockstepError) and not issubclass(cls, ValueError), cls.__mro__
    # tf.function re-raises only errors whose __init__ is Exception's with their own type.
    for cls in (
        hvd.LockstepError,
        hvd.InvalidArgumentError,
        hvd.PreconditionError,
        hvd.AbortedError,
        hvd.UnsupportedOperationError,
        _core.UnimplementedError,
    ):
        assert cls.__init__ is Exception.__init__, cls
        assert str(cls("message")) == "message"


def test_scalars_are_refused_with_horovods_types():
    for horovod_type in (ValueError, RuntimeError):
        with pytest.raises(horovod_type, match="at least one dimension"):
            core_check(_core.OpType.REDUCESCATTER, shape=())
