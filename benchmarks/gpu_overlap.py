"""The GPU benchmark's overlap part (gpu_bench_worker.py --parts overlap): a ResNet-50
training step whose gradients are allreduced from backward hooks, against the same
allreduces started only after backward, plus CUDA events that show when the first
gradient's reduction finished on the GPU relative to the end of backward.

The first reduction's end is bounded from above: once its handle completed on the
host (polled from the next hooks), an event is recorded on lockstep's stream, after
that collective and whatever lockstep queued since. Before issue 22 the framework's
stream waited on each collective when lockstep completed it, so the rest of backward
queued behind the reductions; now it waits only at synchronize().
"""

import numpy as np
import torch
from resnet50_model import ResNet50

import lockstep.torch as hvd
from lockstep import _core


class ProbedHooks:
    """allreduce_async_ of each gradient from its post-accumulate hook; records an event
    on lockstep's stream once the first handle has completed on the host."""

    def __init__(self, model, prefix, device):
        self.device = device
        self.handles = []
        self.probe = None
        self.probing = False
        for index, param in enumerate(model.parameters()):
            param.register_post_accumulate_grad_hook(lambda p, name=f"{prefix}.{index}": self._hook(p, name))

    def _hook(self, param, name):
        self.handles.append(hvd.allreduce_async_(param.grad, name=name, op=hvd.Average))
        if self.probing and self.probe is None and len(self.handles) > 1 and hvd.poll(self.handles[0]):
            stream = torch.cuda.ExternalStream(_core.gpu_stream(self.device.index), device=self.device)
            self.probe = torch.cuda.Event(enable_timing=True)
            self.probe.record(stream)

    def wait(self):
        for handle in self.handles:
            hvd.synchronize(handle)
        self.handles = []


def measure_overlap(rank, quick):
    batch = 8 if quick else 32
    images = torch.randn(batch, 3, 224, 224, device=rank.device)
    labels = torch.randint(0, 1000, (batch,), device=rank.device)

    def make():
        torch.manual_seed(0)
        model = ResNet50().to(rank.device)
        return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    hooked_model, hooked_optimizer = make()
    hooks = ProbedHooks(hooked_model, "bench.overlap", rank.device)
    late_model, late_optimizer = make()

    def overlapped():
        hooked_optimizer.zero_grad()
        torch.nn.functional.cross_entropy(hooked_model(images), labels).backward()
        hooks.wait()
        hooked_optimizer.step()

    def after_backward():
        late_optimizer.zero_grad()
        torch.nn.functional.cross_entropy(late_model(images), labels).backward()
        handles = [
            hvd.allreduce_async_(p.grad, name=f"bench.late.{i}", op=hvd.Average)
            for i, p in enumerate(late_model.parameters())
        ]
        for handle in handles:
            hvd.synchronize(handle)
        late_optimizer.step()

    samples = rank.interleaved(
        {"hooks (overlap)": overlapped, "after backward": after_backward},
        rounds=3 if quick else 6,
        count=2 if quick else 5,
        warmup=3,
    )
    row = {"batch": batch}
    row.update({variant: float(np.median(seconds)) for variant, seconds in samples.items()})
    row.update(probe_first_reduction(rank, hooks, hooked_model, hooked_optimizer, images, labels))
    rank.ctx.log(f"overlap: {row}")
    return row


def probe_first_reduction(rank, hooks, model, optimizer, images, labels, steps=5):
    """Milliseconds from backward's start to its end and to the first reduction's
    (bounded) end on the GPU, medians over `steps` steps, the slowest rank's."""
    backward_ms, first_ms = [], []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        hooks.probing, hooks.probe = True, None
        start.record()
        loss.backward()
        end.record()
        hooks.probing = False
        hooks.wait()
        optimizer.step()
        torch.cuda.synchronize()
        backward_ms.append(start.elapsed_time(end))
        first_ms.append(start.elapsed_time(hooks.probe) if hooks.probe is not None else float("nan"))
    backward, first = rank.ctx.slowest([float(np.median(backward_ms)), float(np.nanmedian(first_ms))])
    return {"backward_ms": float(backward), "first_reduction_done_ms": float(first)}
