"""Benchmark 4: training throughput of the Fashion-MNIST convnet (batch 64 per rank).

Five copies of the model, identically initialized, train side by side in one
process, block by block: with no communication at all, with only a per-step
synchronization (one 4-byte allreduce), with lockstep's DistributedOptimizer (its
default, gradients handed over in buckets, and groups=0, each gradient handed over
the moment backward produces it, as Horovod does), and with torch DDP over gloo.
One torch thread per rank.
Each block is a fixed number of steps; throughput = samples of all ranks / time
of the slowest rank. The driver runs this at 1 and at 2 ranks and computes the
scaling efficiency throughput(2) / (2 x throughput(1)).
"""

import harness
import numpy as np
import torch
import torch.nn.functional as F
from convnet import FashionConvNet, fashion_mnist_batches, synthetic_batches
from mpi4py import MPI
from thread_cpu import ThreadMeter
from torch.nn.parallel import DistributedDataParallel

TRAINING_VARIANT = "lockstep DistributedOptimizer"
PER_GRADIENT_VARIANT = "lockstep DistributedOptimizer, groups=0 (per gradient)"

BATCH_SIZE = 64
SEED = 42


def add_arguments(parser):
    parser.add_argument("--data", choices=("synthetic", "real"), default="synthetic")
    parser.add_argument("--rounds", type=int, default=6, help="timed blocks per variant")
    parser.add_argument("--steps", type=int, default=20, help="training steps per block")


def new_model():
    torch.manual_seed(SEED)  # the same initial weights on every rank and in every variant
    return FashionConvNet()


def new_sgd(parameters):
    return torch.optim.SGD(parameters, lr=0.01, momentum=0.9)


def training_step(model, optimizer, batches):
    images, labels = batches.next()
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()


def make_variants(ctx, batches, steps):
    import lockstep.torch as ls

    plain = new_model()
    plain_optimizer = new_sgd(plain.parameters())
    lockstep_model = new_model()
    lockstep_optimizer = ls.DistributedOptimizer(
        new_sgd(lockstep_model.parameters()), named_parameters=lockstep_model.named_parameters()
    )
    ls.broadcast_parameters(lockstep_model.state_dict(), root_rank=0)
    # groups=0: no buckets, each gradient's allreduce submitted as soon as backward
    # produces it, as Horovod does (a negotiation cycle for almost every gradient).
    per_gradient_model = new_model()
    per_gradient_optimizer = ls.DistributedOptimizer(
        new_sgd(per_gradient_model.parameters()), named_parameters=per_gradient_model.named_parameters(), groups=0
    )
    ddp = DistributedDataParallel(new_model())
    ddp_optimizer = new_sgd(ddp.parameters())
    synced = new_model()
    synced_optimizer = new_sgd(synced.parameters())
    flag = torch.zeros(1)
    models = {
        "no communication": (plain, plain_optimizer, None),
        # No gradient averaging, only one 4-byte allreduce per step: the ranks wait for
        # each other once a step, which every synchronous data-parallel step must do.
        # Its efficiency is the ceiling for the averaging variants on jittery cores.
        "per-step sync only": (synced, synced_optimizer, lambda: ls.allreduce(flag, name="bench.step.sync")),
        TRAINING_VARIANT: (lockstep_model, lockstep_optimizer, None),
        PER_GRADIENT_VARIANT: (per_gradient_model, per_gradient_optimizer, None),
        "torch DDP (gloo)": (ddp, ddp_optimizer, None),
    }
    blocks = {
        name: _block(model, optimizer, batches, steps, after_step)
        for name, (model, optimizer, after_step) in models.items()
    }
    # How busy lockstep's background thread is while the DistributedOptimizer trains.
    meter = ThreadMeter("lockstep-bg")
    blocks[TRAINING_VARIANT] = _metered(blocks[TRAINING_VARIANT], meter)
    return blocks, {name: model for name, (model, _, _) in models.items()}, meter


def _metered(run_block, meter):
    def run_metered_block():
        with meter:
            run_block()

    return run_metered_block


def parameters_agree(ctx, model):
    """True when this model's parameters are the same on every rank: the check that
    a synchronizing variant really averaged the gradients (ranks see different data)."""
    local = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
    on_root = local.copy()
    ctx.comm.Bcast(on_root, root=0)
    return bool(ctx.comm.allreduce(int(np.allclose(local, on_root, rtol=1e-6, atol=1e-7)), op=MPI.MIN))


def _block(model, optimizer, batches, steps, after_step=None):
    model.train()

    def run_block():
        for _ in range(steps):
            training_step(model, optimizer, batches)
            if after_step is not None:
                after_step()

    return run_block


def run(args, ctx):
    if not harness.lockstep_torch_available(ctx):
        raise SystemExit("bench_training needs lockstep.torch")
    if args.data == "real":
        batches = fashion_mnist_batches(ctx.rank, ctx.size, BATCH_SIZE)
    else:
        batches = synthetic_batches(ctx.rank, BATCH_SIZE)
    rounds, steps = (2, 5) if args.quick else (args.rounds, args.steps)
    variants, models, meter = make_variants(ctx, batches, steps)
    samples = harness.run_interleaved(ctx, variants, rounds=rounds, reps=1, warmup=1)
    samples_per_block = BATCH_SIZE * ctx.size * steps
    rows = []
    for name, seconds in samples.items():
        throughput = samples_per_block / np.asarray(seconds)
        in_sync = parameters_agree(ctx, models[name])
        row = {
            "variant": name,
            "throughput_per_block": throughput.tolist(),
            "median_samples_per_s": float(np.median(throughput)),
            "parameters_in_sync": in_sync,
        }
        if name == TRAINING_VARIANT and meter.tid is not None:
            row.update(_background_thread_use(meter, steps))
        rows.append(row)
        ctx.log(
            f"{ctx.size} rank(s), {name}: {np.median(throughput):.0f} samples/s, "
            f"parameters {'identical' if in_sync else 'differ'} across ranks"
        )
    ctx.write_json(
        args.out,
        {
            "benchmark": "training",
            "data": args.data,
            "batch_per_rank": BATCH_SIZE,
            "steps_per_block": steps,
            "rows": rows,
        },
    )


def _background_thread_use(meter, steps):
    """The background thread's share of one core, and its wake-ups per step, while
    the DistributedOptimizer trains (warm-up block included)."""
    return {
        "background_thread_core_fraction": meter.cpu_ns / 1e9 / meter.wall_s,
        "background_thread_wakeups_per_step": meter.scheduled / (meter.spans * steps),
    }


def main():
    harness.main_with_gloo(__doc__, run, add_arguments)


if __name__ == "__main__":
    main()
