"""A grouped allreduce may reuse a name with one member changed.

Two DistributedOptimizers over different models, or one rebuilt after the model
changed, submit groups under names used before. When only some members of the
group changed (shape here), the unchanged ones hit the core's response cache
and the changed one needs a full negotiation round; the group must still
complete. Polled with a deadline so a hang fails fast instead of stalling the job.
"""

import time

import torch
import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
from torch_checks import assert_tensor_equal

import lockstep.torch as hvd

DEADLINE_SECONDS = 10


def grouped_sum_with_deadline(shapes, what):
    tensors = [torch.ones(shape) for shape in shapes]
    handle = hvd.grouped_allreduce_async_(tensors, op=hvd.Sum, name="reused.group")
    started = time.monotonic()
    while not hvd.poll(handle):
        if time.monotonic() - started > DEADLINE_SECONDS:
            raise AssertionError(
                f"{what}: grouped allreduce of shapes {shapes} did not complete within "
                f"{DEADLINE_SECONDS} s (core bug: a group mixing cached and changed members hangs)"
            )
        time.sleep(0.01)
    return hvd.synchronize(handle)


def run(rank, size):
    for step, shapes in enumerate([[(8, 6), (8,)], [(8, 6), (8,)], [(8, 6), (3,)]]):
        what = f"step {step}" + (" (second member's shape changed)" if step == 2 else "")
        for tensor, shape in zip(grouped_sum_with_deadline(shapes, what), shapes):
            assert_tensor_equal(tensor, torch.full(shape, float(size)), what)
