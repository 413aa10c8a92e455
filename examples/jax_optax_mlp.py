"""Data-parallel training of an MLP on Fashion-MNIST with plain JAX and optax.

    mpirun -np 2 python examples/jax_optax_mlp.py [--epochs 3]

The Horovod way in JAX: the same script on every rank, one changed optimizer line
(hvd.DistributedOptimizer around any optax transformation averages the gradients
inside the jitted step), parameters and optimizer state broadcast from rank 0.
Only rank 0 prints. Exits non-zero unless every rank ends with identical parameters.
"""

import argparse
import hashlib
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from data import load_fashion_mnist, shard_indices

import lockstep.jax as hvd


def init_mlp(key, sizes=(784, 256, 128, 10)):
    params = []
    for layer_key, (fan_in, fan_out) in zip(jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        params.append(
            {"w": jax.random.normal(layer_key, (fan_in, fan_out)) * jnp.sqrt(2.0 / fan_in), "b": jnp.zeros(fan_out)}
        )
    return params


def logits_of(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits_of(params, x), y).mean()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128, help="examples per rank per step")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate for one rank")
    parser.add_argument(
        "--train-examples", type=int, default=None, help="train on the first N examples only (quick runs, tests)"
    )
    args = parser.parse_args()

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    data = load_fashion_mnist()
    shard = shard_indices(args.train_examples or len(data.train_labels), rank, size)
    images = data.train_images[shard].reshape(len(shard), -1)
    labels = data.train_labels[shard].astype(np.int32)

    tx = hvd.DistributedOptimizer(optax.adam(args.lr * size))  # the one changed line
    params = hvd.broadcast_parameters(init_mlp(jax.random.PRNGKey(rank)), root_rank=0)
    opt_state = hvd.broadcast_parameters(tx.init(params), root_rank=0)

    @jax.jit
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(grads, opt_state, params)  # averaged over ranks
        return optax.apply_updates(params, updates), opt_state, loss

    steps = len(labels) // args.batch_size  # the same on every rank
    rng = np.random.default_rng(rank)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = rng.permutation(len(labels))
        losses = []
        for step in range(steps):
            batch = order[step * args.batch_size : (step + 1) * args.batch_size]
            params, opt_state, loss = train_step(params, opt_state, images[batch], labels[batch])
            losses.append(loss)
        mean_loss = float(hvd.allreduce(np.mean(jax.device_get(losses)), op=hvd.Average))
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {mean_loss:.4f} ({time.perf_counter() - start:.1f}s)", flush=True)

    share = np.arange(rank, len(data.test_labels), size)
    predicted = np.argmax(jax.jit(logits_of)(params, data.test_images[share].reshape(len(share), -1)), axis=1)
    correct = hvd.allreduce(
        np.array([np.count_nonzero(predicted == data.test_labels[share]), len(share)], np.int32), op=hvd.Sum
    )
    digest = hashlib.sha256(b"".join(np.asarray(leaf).tobytes() for leaf in jax.tree.leaves(params))).hexdigest()
    identical = len(set(hvd.allgather_object(digest))) == 1
    if rank == 0:
        print(f"test accuracy {int(correct[0]) / int(correct[1]):.2%} after {args.epochs} epochs")
        print(
            "parameters identical on all ranks" if identical else "ERROR: ranks hold different parameters", flush=True
        )
    hvd.shutdown()
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
