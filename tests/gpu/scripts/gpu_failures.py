"""Failures of the GPU path end with a clear error on every rank, never a hang, and
leave torch's CUDA context usable. argv[1] picks the case:

init-fails-on-one-rank: the last rank cannot set up NCCL (an impossible
  NCCL_SOCKET_IFNAME, on that rank only). Every rank's first GPU op fails naming the
  communicator setup within LOCKSTEP_NCCL_TIMEOUT_SECONDS (plus the agreement's
  grace), later GPU ops fail alike, host ops keep working, shutdown returns.

collective-times-out: the last rank's GPU sleeps far longer than
  LOCKSTEP_NCCL_TIMEOUT_SECONDS before producing its input, so the others' NCCL kernel
  hangs. On the others, the watchdog notices, synchronize() of the pending op fails
  (its output is undefined; with torch's NCCL, which has no ncclCommRevoke, the
  message says to restart), torch can still allocate and compute,
  later GPU ops fail (on the last rank too, once its collective has run and failed),
  host ops work, and shutdown returns on every rank.
"""

import os
import sys
import time

import torch
from gpu_checks import start
from rank_checks import run_main

import lockstep.torch as hvd


def expect_failure(call, *needles):
    try:
        call()
    except hvd.LockstepError as error:
        text = str(error)
        for needle in needles:
            assert needle in text, f"expected {needle!r} in: {text}"
        return text
    raise AssertionError(f"expected a LockstepError naming {needles}")


def host_ops_still_work(rank, size):
    total = hvd.allreduce(torch.ones(4), name="host.after", op=hvd.Sum)
    assert torch.equal(total, torch.full((4,), float(size))), total


def init_fails_on_one_rank(rank, size, device, timeout):
    if rank == size - 1:
        os.environ["NCCL_SOCKET_IFNAME"] = "lockstep_no_such_interface"
    started = time.monotonic()
    text = expect_failure(
        lambda: hvd.allreduce(torch.ones(8, device=device), name="first.gpu"), "NCCL communicator setup"
    )
    took = time.monotonic() - started
    print(f"rank {rank}: first GPU op failed after {took:.1f} s: {text}", flush=True)
    assert took < timeout + 45, f"took {took:.1f} s, past the deadline"
    expect_failure(lambda: hvd.allreduce(torch.ones(8, device=device), name="second.gpu"), "NCCL communicator setup")
    host_ops_still_work(rank, size)


def collective_times_out(rank, size, device, timeout):
    began = time.monotonic()

    def stage(text):  # where each rank got to, and when: shown if the run times out
        print(f"rank {rank}: +{time.monotonic() - began:.1f} s {text}", flush=True)

    data = torch.ones(1 << 20, device=device)
    hvd.allreduce_(data, name="warm.up")
    torch.cuda.synchronize()
    if rank == size - 1:
        torch.cuda._sleep(int(2e9) * int(timeout * 4))  # ~4x the timeout at ~2 GHz
    held = torch.full((1 << 20,), 1.0, device=device)
    handle = hvd.allreduce_async(held, name="held.up", op=hvd.Sum)
    stage("held.up submitted")
    if rank != size - 1:
        time.sleep(timeout * 2)  # the watchdog fires meanwhile
        text = expect_failure(lambda: hvd.synchronize(handle), "did not complete", "LOCKSTEP_NCCL_TIMEOUT_SECONDS")
        print(f"rank {rank}: the pending op failed: {text}", flush=True)
        x = torch.randn(512, 512, device=device)  # torch's context still works
        value = float((x @ x.T).trace())
        assert value > 0, value
    else:
        try:
            hvd.synchronize(handle)
        except hvd.LockstepError as error:
            print(f"rank {rank}: its own held-up op failed too: {error}", flush=True)
        # Its collective starts only once the sleep ends, and then fails (the peer gave
        # up): wait for that, so that its next GPU op, like the others', meets a stopped
        # communicator. Every rank must submit the same ops, or both would wait forever.
        torch.cuda.current_stream().synchronize()
        stage("its stream drained")
    expect_failure(lambda: hvd.allreduce(torch.ones(8, device=device), name="after.gpu"), "stopped earlier")
    print(f"rank {rank}: pending op failed, torch still computes, later GPU ops fail", flush=True)
    stage("before the host allreduce")
    host_ops_still_work(rank, size)
    stage("host allreduce done")


def main():
    case = sys.argv[1]
    rank, size, device = start()
    timeout = float(os.environ["LOCKSTEP_NCCL_TIMEOUT_SECONDS"])
    {"init-fails-on-one-rank": init_fails_on_one_rank, "collective-times-out": collective_times_out}[case](
        rank, size, device, timeout
    )
    started = time.monotonic()
    hvd.shutdown()
    print(f"rank {rank}: shutdown returned after {time.monotonic() - started:.1f} s", flush=True)


if __name__ == "__main__":
    run_main(main)
