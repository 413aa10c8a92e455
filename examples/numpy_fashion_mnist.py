"""Data-parallel training of a small MLP on Fashion-MNIST with lockstep.numpy.

    lockstep-run -np 2 python examples/numpy_fashion_mnist.py [--epochs 3]

Plain numpy, hand-written backward pass. Every rank trains on its own shard of the
training set; rank 0's initial weights are broadcast, gradients are averaged with
one grouped allreduce per step, and at the end every rank must hold bitwise the
same weights (the script exits non-zero otherwise).
"""

import functools
import os

# One BLAS thread per rank: ranks already fill the cores, and oversubscribed BLAS
# threads would fight lockstep's background thread. Must be set before numpy loads.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from data import load_fashion_mnist, shard_indices  # noqa: E402
from tqdm import tqdm  # noqa: E402

import lockstep.numpy as hvd  # noqa: E402

LAYER_SIZES = (28 * 28, 256, 10)
PARAMETER_NAMES = ("w1", "b1", "w2", "b2")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="examples per rank per step")
    parser.add_argument(
        "--lr", type=float, default=0.03, help="peak learning rate for one rank; scaled by the number of ranks"
    )
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or args.lr <= 0:
        parser.error("--epochs, --batch-size and --lr must be positive")
    return args


def init_parameters(rng):
    """He-initialized weights, zero biases, all float32."""
    n_in, n_hidden, n_out = LAYER_SIZES
    return {
        "w1": (rng.standard_normal((n_in, n_hidden)) * np.sqrt(2.0 / n_in)).astype(np.float32),
        "b1": np.zeros(n_hidden, np.float32),
        "w2": (rng.standard_normal((n_hidden, n_out)) * np.sqrt(2.0 / n_hidden)).astype(np.float32),
        "b2": np.zeros(n_out, np.float32),
    }


def forward(params, images):
    """Logits and the activations the backward pass needs."""
    x = images.reshape(len(images), -1)
    hidden = np.maximum(x @ params["w1"] + params["b1"], 0)
    return hidden @ params["w2"] + params["b2"], (x, hidden)


def softmax_cross_entropy(logits, labels):
    """Mean loss and its gradient with respect to the logits."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    rows = np.arange(len(labels))
    loss = -log_probs[rows, labels].mean()
    grad = np.exp(log_probs)
    grad[rows, labels] -= 1
    return float(loss), grad / len(labels)


def backward(params, activations, grad_logits):
    x, hidden = activations
    grad_hidden = grad_logits @ params["w2"].T
    grad_hidden[hidden <= 0] = 0
    return {
        "w1": x.T @ grad_hidden,
        "b1": grad_hidden.sum(axis=0),
        "w2": hidden.T @ grad_logits,
        "b2": grad_logits.sum(axis=0),
    }


class MomentumSGD:
    """SGD with momentum and a cosine-decaying learning rate.

    The decay to zero over the run steadies the final accuracy, which otherwise
    swings by a point or more from one epoch to the next.
    """

    def __init__(self, params, peak_lr, momentum, total_steps):
        self.peak_lr = peak_lr
        self.momentum = np.float32(momentum)
        self.total_steps = total_steps
        self.steps_taken = 0
        self.velocity = {name: np.zeros_like(value) for name, value in params.items()}

    def current_lr(self):
        progress = self.steps_taken / self.total_steps
        return np.float32(self.peak_lr * 0.5 * (1 + np.cos(np.pi * progress)))

    def step(self, params, grads):
        lr = self.current_lr()
        for name in PARAMETER_NAMES:
            self.velocity[name] = self.momentum * self.velocity[name] + grads[name]
            params[name] -= lr * self.velocity[name]
        self.steps_taken += 1


def average_gradients(grads):
    # One group per step: negotiated as a unit and fused into one buffer. The stable
    # name lets the response cache skip renegotiation after the first step.
    averaged = hvd.grouped_allreduce([grads[name] for name in PARAMETER_NAMES], op=hvd.Average, name="gradients")
    return dict(zip(PARAMETER_NAMES, averaged))


def train_epoch(params, optimizer, data, shard, batch_size, rng, epoch):
    """One pass over this rank's shard; returns the loss averaged over all ranks."""
    order = rng.permutation(shard)
    steps = len(order) // batch_size  # equal on every rank: shards are equal
    losses = np.empty(steps, np.float64)
    progress = tqdm(range(steps), desc=f"epoch {epoch}", disable=hvd.rank() != 0, file=sys.stdout, mininterval=1.0)
    for step in progress:
        batch = order[step * batch_size : (step + 1) * batch_size]
        logits, activations = forward(params, data.train_images[batch])
        losses[step], grad_logits = softmax_cross_entropy(logits, data.train_labels[batch])
        optimizer.step(params, average_gradients(backward(params, activations, grad_logits)))
    mean_loss = np.array([losses.mean()])
    return float(hvd.allreduce(mean_loss, op=hvd.Average, name="epoch_loss")[0])


def evaluate_accuracy(params, data):
    """Accuracy on the whole test set; each rank scores its share of it."""
    share = np.arange(hvd.rank(), len(data.test_labels), hvd.size())
    logits, _ = forward(params, data.test_images[share])
    correct = np.count_nonzero(logits.argmax(axis=1) == data.test_labels[share])
    totals = hvd.allreduce(np.array([correct, len(share)], np.int64), op=hvd.Sum, name="test_accuracy")
    return totals[0] / totals[1]


def weights_digest(params):
    digest = hashlib.sha256()
    for name in PARAMETER_NAMES:
        digest.update(np.ascontiguousarray(params[name]).tobytes())
    return np.frombuffer(digest.digest(), np.uint8)


def all_ranks_identical(params):
    """True on every rank iff every rank's weights hash to rank 0's, bit for bit."""
    digests = hvd.allgather(weights_digest(params), name="weights_digest")
    digests = digests.reshape(hvd.size(), -1)
    return bool((digests == digests[0]).all())


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
    data = load_fashion_mnist()
    shard = shard_indices(len(data.train_labels), hvd.rank(), hvd.size())
    # Different seeds per rank on purpose: the broadcast is what makes them agree.
    params = init_parameters(np.random.default_rng(args.seed + hvd.rank()))
    params = {name: hvd.broadcast(params[name], root_rank=0, name=f"init.{name}") for name in PARAMETER_NAMES}
    steps_per_epoch = len(shard) // args.batch_size
    if steps_per_epoch == 0:
        raise SystemExit(f"--batch-size {args.batch_size} exceeds the {len(shard)} training examples each rank has")
    optimizer = MomentumSGD(params, args.lr * hvd.size(), args.momentum, total_steps=args.epochs * steps_per_epoch)
    shuffle_rng = np.random.default_rng([args.seed, hvd.rank()])
    log(
        f"{hvd.size()} ranks, {len(shard)} training examples each, "
        f"batch {args.batch_size} per rank, peak lr {args.lr * hvd.size():g}"
    )

    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        loss = train_epoch(params, optimizer, data, shard, args.batch_size, shuffle_rng, epoch)
        accuracy = evaluate_accuracy(params, data)
        log(f"epoch {epoch}: loss {loss:.4f}  test accuracy {accuracy:.2%}  ({time.perf_counter() - start:.1f}s)")

    identical = all_ranks_identical(params)
    log("weights bitwise identical on all ranks" if identical else "ERROR: ranks hold different weights")
    hvd.shutdown()
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
