"""lockstep.tensorflow collectives on every supported dtype, run eagerly, all
together inside one tf.function, and all together in one tf.compat.v1 Session
run; exact results.

Each Case knows its rank's input and the exact expected output, so the same list
runs in both modes.
"""

from dataclasses import dataclass
from typing import Callable, List

import numpy as np
import tensorflow as tf
from rank_checks import (
    ALL_DTYPES,
    BOOL,
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    assert_equal,
    average_values,
    expected_reduction,
    product_values,
    rank_values,
)

import lockstep.tensorflow as hvd

OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max, "Product": hvd.Product}


@dataclass
class Case:
    what: str
    run: Callable  # list of input tensors -> list of output tensors
    inputs: List[np.ndarray]
    expected: List[np.ndarray]


def reduction_inputs(dtype, shape, op_name, size):
    if op_name == "Product":
        return [product_values(dtype, shape, r) for r in range(size)]
    if op_name == "Average":
        return [average_values(dtype, shape, r, size) for r in range(size)]
    return [rank_values(dtype, shape, r) for r in range(size)]


def encoded_rows(dtype, sender, rows, row_shape=(2,)):
    """Rows whose values say who sent them and which row they were."""
    values = sender * 10 + np.arange(rows).reshape((rows,) + (1,) * len(row_shape))
    values = np.broadcast_to(values, (rows,) + row_shape)
    if dtype == BOOL:
        return np.ascontiguousarray(values % 2 == 1)
    return np.ascontiguousarray(values).astype(dtype)


def allreduce_cases(dtype, rank, size):
    cases = []
    op_names = ["Sum", "Min", "Max", "Product"] if dtype == BOOL else list(OPS)
    for op_name in op_names:
        for shape in [(5,), (2, 3), ()]:
            inputs = reduction_inputs(dtype, shape, op_name, size)
            op = OPS[op_name]
            cases.append(
                Case(
                    f"allreduce {dtype.name} {op_name} {shape}",
                    lambda xs, op=op: [hvd.allreduce(xs[0], op=op)],
                    [inputs[rank]],
                    [expected_reduction(inputs, dtype, op_name, size)],
                )
            )
    if dtype != BOOL:
        prescale, postscale = (0.5, 4.0) if dtype in FLOAT_DTYPES else (2.0, 3.0)
        inputs = reduction_inputs(dtype, (4,), "Sum", size)
        cases.append(
            Case(
                f"allreduce {dtype.name} scaled",
                lambda xs: [hvd.allreduce(xs[0], op=hvd.Sum, prescale_factor=prescale, postscale_factor=postscale)],
                [inputs[rank]],
                [expected_reduction(inputs, dtype, "Sum", size, prescale, postscale)],
            )
        )
    return cases


def data_movement_cases(dtype, rank, size):
    parts = [encoded_rows(dtype, r, r + 1) for r in range(size)]
    cases = [Case(f"allgather {dtype.name}", lambda xs: [hvd.allgather(xs[0])], [parts[rank]], [np.concatenate(parts)])]
    root = size - 1
    cases.append(
        Case(
            f"broadcast {dtype.name}",
            lambda xs: [hvd.broadcast(xs[0], root)],
            [rank_values(dtype, (3, 2), rank)],
            [rank_values(dtype, (3, 2), root)],
        )
    )
    cases.append(alltoall_case(dtype, rank, size))
    even = [encoded_rows(dtype, s, 2 * size) for s in range(size)]
    cases.append(
        Case(
            f"alltoall even {dtype.name}",
            lambda xs: [hvd.alltoall(xs[0])],
            [even[rank]],
            [np.concatenate([part[2 * rank : 2 * rank + 2] for part in even])],
        )
    )
    for op_name in ["Sum"] if dtype == BOOL else ["Sum", "Average"]:
        cases.append(reducescatter_case(dtype, op_name, rank, size))
    return cases


def alltoall_case(dtype, rank, size):
    return splits_alltoall_case(
        f"alltoall splits {dtype.name}", dtype, rank, size, lambda sender: [(sender + dest) % 3 for dest in range(size)]
    )


def alltoall_sparse_case(dtype, rank, size):
    """Rank 0 sends nothing (an empty tensor) and the last rank receives nothing."""
    return splits_alltoall_case(
        f"alltoall empty sends/receives {dtype.name}",
        dtype,
        rank,
        size,
        lambda sender: [0 if sender == 0 or dest == size - 1 else dest + 1 for dest in range(size)],
    )


def splits_alltoall_case(what, dtype, rank, size, splits_of):
    """alltoall where rank s sends splits_of(s)[d] rows to rank d."""
    sent = [encoded_rows(dtype, s, sum(splits_of(s))) for s in range(size)]
    received = []
    for sender in range(size):
        start = sum(splits_of(sender)[:rank])
        received.append(sent[sender][start : start + splits_of(sender)[rank]])
    expected_splits = np.array([splits_of(s)[rank] for s in range(size)], np.int32)
    return Case(
        what,
        lambda xs: list(hvd.alltoall(xs[0], splits=xs[1])),
        [sent[rank], np.array(splits_of(rank), np.int32)],
        [np.concatenate(received), expected_splits],
    )


def reducescatter_case(dtype, op_name, rank, size):
    rows = 2 * size + 1  # uneven: the first rows % size ranks get one extra row
    inputs = reduction_inputs(dtype, (rows, 3), op_name, size)
    reduced = expected_reduction(inputs, dtype, op_name, size)
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    start = sum(counts[:rank])
    op = OPS[op_name]
    return Case(
        f"reducescatter {dtype.name} {op_name}",
        lambda xs: [hvd.reducescatter(xs[0], op=op)],
        [inputs[rank]],
        [reduced[start : start + counts[rank]]],
    )


def grouped_data_cases(rank, size):
    """grouped_allgather over every dtype, grouped_reducescatter over every numeric one."""
    parts = {dtype: [encoded_rows(dtype, r, r + 1) for r in range(size)] for dtype in ALL_DTYPES}
    gather = Case(
        "grouped_allgather of every dtype",
        lambda xs: hvd.grouped_allgather(list(xs)),
        [parts[dtype][rank] for dtype in ALL_DTYPES],
        [np.concatenate(parts[dtype]) for dtype in ALL_DTYPES],
    )
    rows = 2 * size + 1
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    start = sum(counts[:rank])
    per_tensor = [reduction_inputs(dtype, (rows, 2), "Sum", size) for dtype in NUMERIC_DTYPES]
    scatter = Case(
        "grouped_reducescatter of every numeric dtype",
        lambda xs: hvd.grouped_reducescatter(list(xs), op=hvd.Sum),
        [inputs[rank] for inputs in per_tensor],
        [
            expected_reduction(inputs, inputs[0].dtype, "Sum", size)[start : start + counts[rank]]
            for inputs in per_tensor
        ],
    )
    return [gather, scatter]


def grouped_case(rank, size):
    per_tensor = [reduction_inputs(dtype, (3,), "Sum", size) for dtype in NUMERIC_DTYPES]
    return Case(
        "grouped_allreduce of every numeric dtype",
        lambda xs: hvd.grouped_allreduce(list(xs), op=hvd.Sum),
        [inputs[rank] for inputs in per_tensor],
        [expected_reduction(inputs, inputs[0].dtype, "Sum", size) for inputs in per_tensor],
    )


def all_cases(rank, size):
    cases = [grouped_case(rank, size)] + grouped_data_cases(rank, size)
    for dtype in ALL_DTYPES:
        cases += allreduce_cases(dtype, rank, size)
        cases += data_movement_cases(dtype, rank, size)
        cases.append(alltoall_sparse_case(dtype, rank, size))
    return cases


def check_outputs(case, outputs, mode):
    assert len(outputs) == len(case.expected), f"{mode} {case.what}: {len(outputs)} outputs"
    for index, (output, expected) in enumerate(zip(outputs, case.expected)):
        if not isinstance(output, (np.ndarray, np.generic)):  # a Session returns arrays
            assert isinstance(output, tf.Tensor), f"{mode} {case.what}: got {type(output).__name__}"
            output = output.numpy()
        assert_equal(np.asarray(output), expected, f"{mode} {case.what} output {index}")


def check_eager(cases):
    for case in cases:
        inputs = [tf.constant(value) for value in case.inputs]
        check_outputs(case, case.run(inputs), "eager")


def check_one_function(cases):
    """Every case in one graph: ~150 independent collectives in flight together."""

    @tf.function
    def run_all(all_inputs):
        return [case.run(inputs) for case, inputs in zip(cases, all_inputs)]

    all_inputs = [[tf.constant(value) for value in case.inputs] for case in cases]
    for execution in range(2):  # a second run reuses the graph's names
        for case, outputs in zip(cases, run_all(all_inputs)):
            check_outputs(case, outputs, f"tf.function run {execution}")


def check_one_session(cases):
    """Every case in one tf.compat.v1 graph, fetched by one Session run, twice."""
    with tf.Graph().as_default():
        fetches = [case.run([tf.constant(value) for value in case.inputs]) for case in cases]
        with tf.compat.v1.Session() as session:
            for execution in range(2):
                for case, outputs in zip(cases, session.run(fetches)):
                    check_outputs(case, list(outputs), f"Session run {execution}")


def check_variables_as_inputs(rank, size):
    variable = tf.Variable(np.full(3, rank + 1, np.float32))
    expected = np.full(3, size * (size + 1) / 2, np.float32)
    assert_equal(hvd.allreduce(variable, op=hvd.Sum).numpy(), expected, "allreduce of a tf.Variable")

    @tf.function
    def reduce_variable():
        return hvd.allreduce(variable, op=hvd.Sum)

    assert_equal(reduce_variable().numpy(), expected, "allreduce of a tf.Variable in tf.function")


def check_collectives(rank, size):
    cases = all_cases(rank, size)
    check_eager(cases)
    check_one_function(cases)
    check_one_session(cases)
    check_variables_as_inputs(rank, size)
