"""Stream ordering without host stalls.

- A gradient produced late on a side stream (behind torch.cuda._sleep) is reduced
  correctly: lockstep waits for it on the GPU, not on the host, and hands control
  back while the GPU is still busy.
- A whole DistributedOptimizer step (forward, backward with its hooks, step) passes
  under torch.cuda.set_sync_debug_mode("error") and returns before the GPU is done.
- A result consumed right after synchronize() on the submitting stream is complete.
"""

import time

import torch
import torch.nn.functional as F
from gpu_checks import assert_gpu_result, load_kernels, start
from rank_checks import run_main

import lockstep.torch as hvd

# About half a second of GPU time on current parts (their clocks run at 1-2 GHz).
SLEEP_CYCLES = 1_000_000_000


def check_late_gradient_on_side_stream(rank, size, device):
    main = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    base = torch.full((1 << 20,), float(rank + 1), device=device)
    torch.cuda.synchronize()
    side.wait_stream(main)
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.cuda.stream(side):
            torch.cuda._sleep(SLEEP_CYCLES)
            gradient = base * 2  # made on the side stream, after the sleep
        main.wait_stream(side)
        started = time.perf_counter()
        handle = hvd.allreduce_async(gradient, name="late.gradient", op=hvd.Sum)
        del gradient  # lockstep keeps it alive; its memory must not be reused early
        reduced = hvd.synchronize(handle)
        host_seconds = time.perf_counter() - started
        still_busy = not main.query()
        doubled = reduced * 1  # consumed on the submitting stream, ordered after lockstep's work
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    total = float(size * (size + 1))
    assert_gpu_result(reduced, torch.full((1 << 20,), total), "late side-stream gradient", device)
    assert_gpu_result(doubled, torch.full((1 << 20,), total), "its consumer on the submitting stream")
    assert still_busy, (
        f"the GPU was idle when synchronize() returned after {host_seconds:.3f} s: the host waited for the GPU"
    )
    print(
        f"rank {rank}: side-stream gradient: synchronize() returned after {host_seconds * 1e3:.1f} ms "
        "with the GPU still sleeping",
        flush=True,
    )


def check_optimizer_step_without_host_syncs(rank, size, device):
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), named_parameters=model.named_parameters()
    )
    images = torch.randn(16, 32, device=device) + rank
    labels = torch.arange(16, device=device) % 10
    optimizer.zero_grad()
    F.cross_entropy(model(images), labels).backward()  # the first step creates momentum buffers
    optimizer.step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            optimizer.zero_grad()
            torch.cuda._sleep(SLEEP_CYCLES // 4)  # the backward pass starts late on the GPU
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            started = time.perf_counter()
            optimizer.step()
            host_seconds = time.perf_counter() - started
            still_busy = not torch.cuda.current_stream(device).query()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert still_busy, f"optimizer.step() returned after {host_seconds:.3f} s with the GPU idle: it waited"
    hvd.synchronize(hvd.allreduce_async(torch.zeros(1, device=device), name="drain"))
    torch.cuda.synchronize()
    for param in model.parameters():
        assert torch.isfinite(param).all(), "parameters after the sync-free steps"
    print(f"rank {rank}: optimizer step without host syncs ({host_seconds * 1e3:.1f} ms on the host)", flush=True)


def warm_up(device):
    """The set's first GPU op creates lockstep's stream and the NCCL communicator, which
    takes far longer than the sleeps below: it must not fall inside a timed window, and
    neither may the loading of a kernel (load_kernels)."""
    hvd.allreduce(torch.ones(1, device=device), name="warm.up")
    load_kernels(device, 1 << 20)


def main():
    rank, size, device = start()
    warm_up(device)
    check_late_gradient_on_side_stream(rank, size, device)
    check_optimizer_step_without_host_syncs(rank, size, device)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
