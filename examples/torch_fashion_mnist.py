"""Data-parallel training of a small convnet on Fashion-MNIST with lockstep.torch.

    lockstep-run -np 2 python examples/torch_fashion_mnist.py [--epochs 3]

Written as a Horovod script would be (only the import differs): every rank trains
on its own shard with the learning rate scaled by the number of ranks; rank 0's
weights and optimizer state are broadcast at the start; per-epoch metrics are
averaged across ranks; rank 0 alone writes checkpoints, and a rerun resumes from
the last one (--fresh starts over). The script exits non-zero unless every rank
ends with bitwise identical parameters.
"""

import os

# One math thread per rank: ranks already fill the cores, and extra threads would
# fight lockstep's background thread. Must be set before torch loads.
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import hashlib  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from data import load_fashion_mnist, shard_indices  # noqa: E402
from torch import nn  # noqa: E402
from tqdm import tqdm  # noqa: E402

import lockstep.torch as hvd  # noqa: E402

CHECKPOINT_PATTERN = "epoch-*.pt"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="examples per rank per step")
    parser.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate for one rank; scaled by ranks")
    parser.add_argument(
        "--train-examples",
        type=int,
        default=None,
        help="train on only this many examples per epoch (all ranks together)",
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--checkpoint-dir", default="checkpoints/torch_fashion_mnist")
    parser.add_argument("--fresh", action="store_true", help="ignore existing checkpoints")
    parser.add_argument(
        "--sync-batch-norm",
        action="store_true",
        help="normalize with statistics of all ranks' batches (hvd.SyncBatchNorm)",
    )
    args = parser.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or args.lr <= 0:
        parser.error("--epochs, --batch-size and --lr must be positive")
    return args


def build_model(batch_norm):
    """The convnet of the Keras multi-GPU guide, in torch."""
    return nn.Sequential(
        nn.Conv2d(1, 12, kernel_size=3, padding=1, bias=False),
        batch_norm(12),
        nn.ReLU(),
        nn.Conv2d(12, 24, kernel_size=6, stride=2, bias=False),
        batch_norm(24),
        nn.ReLU(),
        nn.Conv2d(24, 32, kernel_size=6, stride=2, padding=2),
        nn.ReLU(),  # Keras' "same" padding
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 256),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(256, 10),
    )


def as_batch(images, labels):
    return torch.from_numpy(images).unsqueeze(1), torch.from_numpy(labels)


def train_epoch(model, optimizer, data, shard, args, epoch):
    """One pass over this rank's shard; returns (loss, accuracy) averaged over all ranks."""
    model.train()
    order = torch.from_numpy(shard)[torch.randperm(len(shard), generator=epoch_generator(args, epoch))]
    steps = len(order) // args.batch_size  # equal on every rank: shards are equal
    if args.train_examples is not None:
        steps = min(steps, args.train_examples // (args.batch_size * hvd.size()))
    totals = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, examples
    progress = tqdm(range(steps), desc=f"epoch {epoch}", disable=hvd.rank() != 0, file=sys.stdout, mininterval=2.0)
    for step in progress:
        set_learning_rate(optimizer, args, epoch - 1 + step / steps)
        rows = order[step * args.batch_size : (step + 1) * args.batch_size].numpy()
        images, labels = as_batch(data.train_images[rows], data.train_labels[rows])
        optimizer.zero_grad()
        logits = model(images)
        loss = nn.functional.cross_entropy(logits, labels)
        loss.backward()
        optimizer.step()
        totals += torch.tensor(
            [loss.item() * len(rows), (logits.argmax(1) == labels).sum().item(), len(rows)], dtype=torch.float64
        )
    totals = hvd.allreduce(totals, op=hvd.Sum, name="metrics.train")
    return (totals[0] / totals[2]).item(), (totals[1] / totals[2]).item()


def set_learning_rate(optimizer, args, epochs_done):
    """Cosine decay from the scaled peak to zero over the run. Computed from the
    position in training, so a resumed run continues the same schedule; the decay
    steadies the final accuracy, which otherwise swings from epoch to epoch."""
    peak = args.lr * hvd.size()
    for group in optimizer.param_groups:
        group["lr"] = peak * 0.5 * (1 + math.cos(math.pi * epochs_done / args.epochs))


def epoch_generator(args, epoch):
    # Seeded by epoch and rank, so a resumed run shuffles exactly as an uninterrupted one.
    return torch.Generator().manual_seed(args.seed * 1_000_003 + epoch * 1009 + hvd.rank())


def average_batch_norm_statistics(model):
    """Running statistics follow each rank's own batches; averaging them makes every
    rank evaluate (and checkpoint) the same model."""
    buffers = [b for name, b in model.named_buffers() if b.dtype.is_floating_point]
    hvd.grouped_allreduce_(buffers, op=hvd.Average, name="batch_norm_statistics")


@torch.no_grad()
def evaluate(model, data):
    """Test accuracy; each rank scores its share of the test set."""
    model.eval()
    share = torch.arange(hvd.rank(), len(data.test_labels), hvd.size()).numpy()
    correct = 0
    for start in range(0, len(share), 1000):
        rows = share[start : start + 1000]
        images, labels = as_batch(data.test_images[rows], data.test_labels[rows])
        correct += (model(images).argmax(1) == labels).sum().item()
    totals = hvd.allreduce(torch.tensor([correct, len(share)], dtype=torch.int64), op=hvd.Sum, name="metrics.test")
    return totals[0].item() / totals[1].item()


def latest_checkpoint(directory):
    paths = sorted(Path(directory).glob(CHECKPOINT_PATTERN), key=lambda path: int(path.stem.split("-")[1]))
    return paths[-1] if paths else None


def restore(model, optimizer, args):
    """The epoch to resume after; rank 0 reads the checkpoint, the broadcasts share it."""
    resume_epoch = 0
    if hvd.rank() == 0 and not args.fresh:
        path = latest_checkpoint(args.checkpoint_dir)
        if path is not None:
            checkpoint = torch.load(path, weights_only=True)
            model.load_state_dict(checkpoint["model"])
            optimizer.load_state_dict(checkpoint["optimizer"])
            resume_epoch = checkpoint["epoch"]
            log(f"resuming after epoch {resume_epoch} from {path}")
    resume_epoch = hvd.broadcast_object(resume_epoch, root_rank=0, name="resume_epoch")
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    return resume_epoch


def save_checkpoint(model, optimizer, epoch, directory):
    if hvd.rank() != 0:
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    path = Path(directory) / f"epoch-{epoch}.pt"
    partial = path.with_suffix(".partial")  # renamed once complete: a crash never leaves a torn checkpoint
    torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, partial)
    partial.replace(path)


def all_ranks_identical(model):
    """True on every rank iff every rank's parameters and buffers match rank 0's bit for bit."""
    digest = hashlib.sha256()
    for value in model.state_dict().values():
        digest.update(value.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    digests = hvd.allgather_object(digest.hexdigest(), name="weights_digest")
    return all(d == digests[0] for d in digests)


def log(*values):
    if is_root():
        print(*values, flush=True)


@functools.lru_cache(maxsize=None)
def is_root():
    # Asked once: after the last collective, a rank that finished first may already
    # have shut lockstep down on every rank, and hvd.rank() would then raise.
    return hvd.rank() == 0


def main():
    args = parse_args()
    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed + hvd.rank())  # different on purpose: the broadcast makes them agree
    data = load_fashion_mnist()
    shard = shard_indices(len(data.train_labels), hvd.rank(), hvd.size())
    model = build_model(hvd.SyncBatchNorm if args.sync_batch_norm else nn.BatchNorm2d)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    first_epoch = restore(model, optimizer, args) + 1
    log(
        f"{hvd.size()} ranks, {len(shard)} training examples each, batch {args.batch_size} per rank, "
        f"lr {args.lr * hvd.size():g}"
    )

    start = time.perf_counter()
    for epoch in range(first_epoch, args.epochs + 1):
        loss, train_accuracy = train_epoch(model, optimizer, data, shard, args, epoch)
        average_batch_norm_statistics(model)
        accuracy = evaluate(model, data)
        log(
            f"epoch {epoch}: loss {loss:.4f}  train accuracy {train_accuracy:.2%}  test accuracy {accuracy:.2%}  "
            f"({time.perf_counter() - start:.1f}s)"
        )
        save_checkpoint(model, optimizer, epoch, args.checkpoint_dir)
    if first_epoch > args.epochs:
        log(f"all {args.epochs} epochs were already done; test accuracy {evaluate(model, data):.2%}")

    identical = all_ranks_identical(model)
    log("parameters bitwise identical on all ranks" if identical else "ERROR: ranks hold different parameters")
    hvd.shutdown()
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
