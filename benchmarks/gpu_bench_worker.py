"""One rank of the GPU benchmark (bench_gpu.py launches it under mpirun).

lockstep and torch.distributed's NCCL backend run in the same processes, on the same
GPU and the same NCCL library (torch's, which lockstep adopts because torch loaded it
first), interleaved round by round with the variant order rotating, so both see the
same machine and transport. A timing covers a block of operations from the first
launch until the GPU has finished them all (torch.cuda.synchronize()), divided by the
block's length, as nccl-tests report time; a block counts as long as its slowest rank.

Parts:
  allreduce  in-place float32 Sum allreduce of 4 B .. 256 MiB, one at a time
  gradients  ResNet-50's 161 gradients reduced by DistributedOptimizer (its gradient
             buckets, then synchronize()) and from per-gradient backward hooks (each
             allreduce starts once autograd has it), against torch DDP's bucketing
  training   a ResNet-50 training step (batch 32, 224x224): plain, DistributedOptimizer,
             per-gradient allreduce hooks, DDP
  overlap    that step with allreduces from backward hooks against the same allreduces
             after backward, and when the first reduction ends on the GPU
             (gpu_overlap.py)
"""

import argparse
import os
import socket
import time

import harness  # mpi4py first: MPI starts with MPI_THREAD_MULTIPLE, then lockstep adopts it
import numpy as np
import torch
import torch.distributed as dist
from gpu_overlap import measure_overlap
from resnet50_model import ResNet50
from resnet50_shapes import gradient_order

import lockstep.torch as hvd

SIZES = [4, 64, 1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]


class Rank:
    def __init__(self):
        self.ctx = harness.BenchContext()
        hvd.init()
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.rank, self.size = hvd.rank(), hvd.size()
        port = self.ctx.comm.bcast(_free_port() if self.rank == 0 else None, root=0)
        dist.init_process_group(
            "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=self.rank, world_size=self.size, device_id=self.device
        )

    def block_time(self, operation, count):
        """Seconds per operation over a block of `count`, until the GPU is done (slowest rank)."""
        torch.cuda.synchronize()
        self.ctx.barrier()
        started = time.perf_counter()
        for _ in range(count):
            operation()
        torch.cuda.synchronize()
        return float(self.ctx.slowest([(time.perf_counter() - started) / count])[0])

    def interleaved(self, variants, rounds, count, warmup=2):
        """{name: [seconds per op of each round]}, the variants' order rotating by round."""
        names = list(variants)
        for name in names:
            self.block_time(variants[name], warmup)
        samples = {name: [] for name in names}
        for index in range(rounds):
            shift = index % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].append(self.block_time(variants[name], count))
        return samples


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def measure_allreduce(rank, quick):
    rows = []
    for nbytes in SIZES[:6] if quick else SIZES:
        elements = max(1, nbytes // 4)
        ours = torch.zeros(elements, device=rank.device)  # zeros: Sum keeps them zero
        theirs = torch.zeros(elements, device=rank.device)
        name = f"bench.allreduce.{nbytes}"
        variants = {
            "lockstep": lambda ours=ours: hvd.allreduce_(ours, name=name, op=hvd.Sum),
            "torch.distributed": lambda theirs=theirs: dist.all_reduce(theirs),
        }
        # Ranks sharing a GPU talk over sockets, where a small op takes milliseconds.
        count = (200 if rank.size == 1 else 40) if nbytes <= 1 << 20 else max(3, (64 << 20) // nbytes * 3)
        samples = rank.interleaved(variants, rounds=3 if quick else 5, count=10 if quick else count)
        row = {"bytes": nbytes}
        for variant, seconds in samples.items():
            row[variant] = float(np.median(seconds))
        rows.append(row)
        rank.ctx.log(
            f"allreduce {nbytes} B: lockstep {row['lockstep'] * 1e6:.1f} us, "
            f"torch.distributed {row['torch.distributed'] * 1e6:.1f} us"
        )
        del ours, theirs
    return rows


class GradientSet(torch.nn.Module):
    """Parameters of ResNet-50's shapes whose backward pass makes every gradient in
    ResNet-50's backward order at almost no compute: what is left is communication."""

    def __init__(self):
        super().__init__()
        self.tensors = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(shape)) for _, shape in gradient_order())

    def forward(self, weight):
        # DDP needs at least one input to forward (torch 2.11 indexes its moved inputs).
        total = None
        for tensor in reversed(list(self.tensors)):  # autograd reaches the last one added first
            total = tensor.sum() if total is None else total + tensor.sum()
        return total * weight


class HookedAllreduce:
    """Each gradient's allreduce_async_ started from its post-accumulate hook, as
    DistributedOptimizer does (which registers no hooks at one rank, as Horovod's)."""

    def __init__(self, module, prefix):
        self.handles = []
        for index, param in enumerate(module.parameters()):
            name = f"{prefix}.{index}"
            param.register_post_accumulate_grad_hook(
                lambda p, name=name: self.handles.append(hvd.allreduce_async_(p.grad, name=name, op=hvd.Average))
            )

    def wait(self):
        for handle in self.handles:
            hvd.synchronize(handle)
        self.handles = []


def measure_gradients(rank, quick):
    ours = GradientSet().to(rank.device)
    hooks = HookedAllreduce(ours, "bench.gradients")
    bucketed = GradientSet().to(rank.device)
    # lr 0 and no step(): synchronize() is the reduction, as DDP's backward is.
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(bucketed.parameters(), lr=0.0), named_parameters=bucketed.named_parameters()
    )
    theirs = torch.nn.parallel.DistributedDataParallel(GradientSet().to(rank.device), device_ids=[rank.device.index])
    weight = torch.ones((), device=rank.device)

    def lockstep_step():
        ours.zero_grad(set_to_none=False)
        ours(weight).backward()
        hooks.wait()

    def optimizer_step():
        optimizer.zero_grad(set_to_none=False)
        bucketed(weight).backward()
        optimizer.synchronize()

    def ddp_step():
        theirs.zero_grad(set_to_none=False)
        theirs(weight).backward()

    samples = rank.interleaved(
        {"lockstep DistributedOptimizer": optimizer_step, "lockstep (hooks)": lockstep_step, "torch DDP": ddp_step},
        rounds=3 if quick else 8,
        count=2 if quick else 5,
    )
    nbytes = sum(p.numel() * 4 for p in ours.parameters())
    row = {"tensors": len(list(ours.parameters())), "bytes": nbytes}
    row.update({variant: float(np.median(seconds)) for variant, seconds in samples.items()})
    rank.ctx.log(f"gradient set: {row}")
    return row


def measure_training(rank, quick):
    batch = 8 if quick else 32
    images = torch.randn(batch, 3, 224, 224, device=rank.device)
    labels = torch.randint(0, 1000, (batch,), device=rank.device)

    def make(wrap):
        torch.manual_seed(0)
        model = ResNet50().to(rank.device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        return wrap(model, optimizer)

    def plain(model, optimizer):
        return model, optimizer, None

    def distributed(model, optimizer):
        return model, hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters()), None

    def hooked(model, optimizer):
        return model, optimizer, HookedAllreduce(model, "bench.training")

    def ddp(model, optimizer):
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank.device.index]), optimizer, None

    def step_of(parts):
        model, optimizer, hooks = parts

        def step():
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(images), labels).backward()
            if hooks is not None:
                hooks.wait()
            optimizer.step()

        return step

    variants = {
        "plain": step_of(make(plain)),
        "DistributedOptimizer": step_of(make(distributed)),
        "allreduce hooks": step_of(make(hooked)),
        "torch DDP": step_of(make(ddp)),
    }
    samples = rank.interleaved(variants, rounds=3 if quick else 6, count=2 if quick else 5, warmup=3)
    row = {"batch": batch}
    row.update({variant: float(np.median(seconds)) for variant, seconds in samples.items()})
    rank.ctx.log(f"training step: {row}")
    return row


def machine_info(rank):
    props = torch.cuda.get_device_properties(rank.device)
    info = hvd.nccl_info()
    return {
        "gpu": props.name,
        "gpu_memory_gib": round(props.total_memory / 2**30, 1),
        "gpus": torch.cuda.device_count(),
        "cpus": os.cpu_count(),
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torch_nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "lockstep_nccl_built": info["built_version"],
        "lockstep_nccl_runtime": info["runtime_version"],
        "lockstep_nccl_library": info["library_path"],
        "lockstep_nccl_source": info["source"],
        "nccl_socket_ifname": os.environ.get("NCCL_SOCKET_IFNAME", ""),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--parts", default="allreduce,gradients,training,overlap")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    rank = Rank()
    parts = args.parts.split(",")
    payload = {"machine": machine_info(rank), "ranks": rank.size}
    try:
        if "allreduce" in parts:
            payload["allreduce"] = measure_allreduce(rank, args.quick)
        if "gradients" in parts:
            payload["gradients"] = measure_gradients(rank, args.quick)
        if "training" in parts:
            payload["training"] = measure_training(rank, args.quick)
        if "overlap" in parts:
            payload["overlap"] = measure_overlap(rank, args.quick)
    finally:
        rank.ctx.write_json(args.out, payload)
        dist.destroy_process_group()
        hvd.shutdown()


if __name__ == "__main__":
    main()
