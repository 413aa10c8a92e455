"""The framework's stream is ordered after a GPU collective when the op is
synchronized, not when lockstep completes it: kernels queued in between (the rest of
backward) run while the collective is still in flight.

The collective is held up on the GPU, not on the host: the last rank queues a long
torch.cuda._sleep before producing its input, so every rank's handle completes on the
host at once while the NCCL kernels wait for that rank's GPU.

- Work queued on the submitting stream after the handle completed, before
  synchronize(), finishes while lockstep's stream is still busy.
- After synchronize() the submitting stream sees the final values.
- A handle synchronized under another torch.cuda.stream(...) gives that stream the final
  values at once (allgather: a result the core allocated, copied out on that stream).
"""

import time

import torch
from gpu_checks import assert_gpu_result, load_kernels, start
from rank_checks import run_main

import lockstep.torch as hvd

SLEEP_CYCLES = 2_000_000_000  # about a second of GPU time
ELEMENTS = 1 << 20


def lockstep_stream(device):
    from lockstep import _core

    return torch.cuda.ExternalStream(_core.gpu_stream(device.index), device=device)


def held_up_input(rank, size, device, value):
    """A tensor whose producer is late on the GPU on the last rank only."""
    if rank == size - 1:
        torch.cuda._sleep(SLEEP_CYCLES)
    return torch.full((ELEMENTS,), float(value), device=device)


def wait_until_completed(handle):
    deadline = time.monotonic() + 30
    while not hvd.poll(handle):
        assert time.monotonic() < deadline, "the handle never completed on the host"
        time.sleep(0.001)


def check_work_before_synchronize_is_not_held(rank, size, device):
    main = torch.cuda.current_stream(device)
    gradient = held_up_input(rank, size, device, rank + 1)
    handle = hvd.allreduce_async(gradient, name="overlap.gradient", op=hvd.Sum)
    wait_until_completed(handle)
    # "The rest of backward": independent work on the submitting stream.
    other = torch.full((ELEMENTS,), 3.0, device=device)
    other_done = torch.cuda.Event()
    (other * 2).sum()
    other_done.record(main)
    busy = lockstep_stream(device)
    deadline = time.monotonic() + 0.5
    while not other_done.query() and time.monotonic() < deadline:
        time.sleep(0.001)
    overlapped = other_done.query() and not busy.query()
    if rank == size - 1:
        # This rank's own stream is the one sleeping: nothing to observe here.
        overlapped = True
    reduced = hvd.synchronize(handle)
    consumed = reduced * 1  # on the submitting stream, after synchronize()
    torch.cuda.synchronize()
    total = float(size * (size + 1) // 2)
    assert_gpu_result(consumed, torch.full((ELEMENTS,), total), "consumed after synchronize()", device)
    assert overlapped, (
        "work queued on the submitting stream before synchronize() waited for the "
        "collective: the stream was ordered at completion, not at synchronize()"
    )
    print(f"rank {rank}: backward-like work finished while the allreduce was in flight", flush=True)


def check_synchronize_under_another_stream(rank, size, device):
    rows = held_up_input(rank, size, device, rank).view(-1, 1024)
    handle = hvd.allgather_async(rows, name="overlap.allgather")
    other = torch.cuda.Stream(device)
    with torch.cuda.stream(other):
        gathered = hvd.synchronize(handle)
        checksum = gathered.sum(dim=1)  # at once on `other`, no host synchronization
    torch.cuda.synchronize()
    per_rank = rows.shape[0]
    expected = torch.cat([torch.full((per_rank,), float(r) * 1024) for r in range(size)])
    assert_gpu_result(checksum, expected, "allgather read on another stream than it was submitted on", device)
    print(f"rank {rank}: allgather synchronized under another stream is complete there", flush=True)


def main():
    rank, size, device = start()
    hvd.allreduce(torch.ones(1, device=device), name="warm.up")  # communicator setup
    load_kernels(device, ELEMENTS)
    check_work_before_synchronize_is_not_held(rank, size, device)
    check_synchronize_under_another_stream(rank, size, device)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
