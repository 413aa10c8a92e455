"""Data-parallel Keras 3 training on the JAX backend, with a hand-written jitted
step in the style of Keras' JAX training guide (stateless_call,
jax.value_and_grad, optimizer.stateless_apply), on Fashion-MNIST.

    mpirun -np 2 python examples/jax_fashion_mnist.py [--epochs 3]

The model is the convnet of keras_fashion_mnist.py. lockstep.keras's
DistributedOptimizer averages the gradients inside the jitted step (one fused XLA
custom call per step); lockstep.jax.broadcast_parameters starts every rank from
rank 0's weights and optimizer state. Only rank 0 prints. The script exits
non-zero unless every rank ends with identical weights.
"""

import os

os.environ["KERAS_BACKEND"] = "jax"

import argparse  # noqa: E402
import hashlib  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from data import load_fashion_mnist, shard_indices  # noqa: E402
from keras_fashion_mnist import build_model  # noqa: E402

import lockstep.jax as hvd  # noqa: E402
import lockstep.keras  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128, help="examples per rank per step")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate for one rank")
    parser.add_argument(
        "--train-examples", type=int, default=None, help="train on the first N examples only (quick runs, tests)"
    )
    args = parser.parse_args()
    if min(args.epochs, args.batch_size) < 1 or args.lr <= 0:
        parser.error("--epochs, --batch-size and --lr must be positive")
    return args


def make_train_step(model, optimizer, loss_fn):
    def loss_and_state(trainable, non_trainable, x, y):
        logits, non_trainable = model.stateless_call(trainable, non_trainable, x, training=True)
        return loss_fn(y, logits), non_trainable

    @jax.jit
    def train_step(state, x, y):
        trainable, non_trainable, optimizer_vars = state
        (loss, non_trainable), grads = jax.value_and_grad(loss_and_state, has_aux=True)(trainable, non_trainable, x, y)
        # The distributed optimizer's apply() averages `grads` over the ranks here.
        trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads, trainable)
        return loss, (trainable, non_trainable, optimizer_vars)

    return train_step


def write_back(model, optimizer, state):
    trainable, non_trainable, optimizer_vars = state
    for variable, value in zip(model.trainable_variables, trainable):
        variable.assign(value)
    for variable, value in zip(model.non_trainable_variables, non_trainable):
        # Batch norm statistics come from each rank's own batches: average them
        # (dropout's seed state, an integer, stays each rank's own).
        floating = np.issubdtype(value.dtype, np.floating)
        variable.assign(hvd.allreduce(value, op=hvd.Average) if floating else value)
    for variable, value in zip(optimizer.variables, optimizer_vars):
        variable.assign(value)


def test_accuracy(model, data):
    share = np.arange(hvd.rank(), len(data.test_labels), hvd.size())
    logits = model.predict(data.test_images[share, ..., None], batch_size=500, verbose=0)
    correct = np.count_nonzero(np.argmax(logits, axis=1) == data.test_labels[share])
    totals = np.asarray(hvd.allreduce(np.array([correct, len(share)], np.int32), op=hvd.Sum))
    return totals[0] / totals[1]


def weights_identical_everywhere(model):
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    digests = hvd.allgather_object(digest.hexdigest())
    return all(d == digests[0] for d in digests)


def main():
    args = parse_args()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    data = load_fashion_mnist()
    shard = shard_indices(args.train_examples or len(data.train_labels), rank, size)
    steps = len(shard) // args.batch_size  # the same on every rank (shards are equal)
    keras.utils.set_random_seed(1234 + rank)  # different on purpose: the broadcast aligns them

    model = build_model()
    optimizer = lockstep.keras.DistributedOptimizer(keras.optimizers.Adam(args.lr * size))
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
    )
    state = hvd.broadcast_parameters(state, root_rank=0)
    train_step = make_train_step(model, optimizer, loss_fn)
    if rank == 0:
        print(
            f"{size} ranks, Keras on JAX with a jitted step, {steps} steps of {args.batch_size} per rank "
            f"per epoch, lr {args.lr * size:g}",
            flush=True,
        )
    images, labels = data.train_images[shard, ..., None], data.train_labels[shard]
    rng = np.random.default_rng(rank)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = rng.permutation(len(labels))
        losses = []
        for step in range(steps):
            batch = order[step * args.batch_size : (step + 1) * args.batch_size]
            loss, state = train_step(state, images[batch], labels[batch])
            losses.append(loss)
        mean_loss = float(hvd.allreduce(np.mean(jax.device_get(losses)), op=hvd.Average))
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {mean_loss:.4f} ({time.perf_counter() - start:.0f}s)", flush=True)
    write_back(model, optimizer, state)
    accuracy = test_accuracy(model, data)
    identical = weights_identical_everywhere(model)
    if rank == 0:
        print(f"test accuracy {accuracy:.2%} after {args.epochs} epochs")
        print("weights identical on all ranks" if identical else "ERROR: ranks hold different weights", flush=True)
    hvd.shutdown()
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
