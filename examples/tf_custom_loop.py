"""A TensorFlow 2 custom training loop on Fashion-MNIST with lockstep.tensorflow.

    mpirun -np 2 python examples/tf_custom_loop.py [--epochs 3]

The train step is a tf.function; DistributedGradientTape averages its gradients
over the ranks with one fused allreduce per step. Rank 0's initial weights and
optimizer state are broadcast before the first step. Only rank 0 prints; the
script exits non-zero unless every rank ends with identical weights.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # the layers must build tf.Variables

import argparse  # noqa: E402
import time  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from data import load_fashion_mnist, shard_indices  # noqa: E402

import lockstep.tensorflow as hvd  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="examples per rank per step")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate for one rank")
    args = parser.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or args.lr <= 0:
        parser.error("--epochs, --batch-size and --lr must be positive")
    return args


def build_model():
    return keras.Sequential(
        [
            keras.Input((28, 28)),
            keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(10),
        ]
    )


class Trainer:
    """The model, its optimizer and the compiled distributed train step."""

    def __init__(self, model, learning_rate):
        self.model = model
        self.optimizer = keras.optimizers.Adam(learning_rate)
        self.optimizer.build(model.trainable_variables)  # create its slots before the broadcast
        self.loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def broadcast_from(self, root_rank):
        hvd.broadcast_variables(self.model.variables + self.optimizer.variables, root_rank)

    @tf.function
    def train_step(self, images, labels):
        with tf.GradientTape() as tape:
            loss = self.loss(labels, self.model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        gradients = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.model.trainable_variables))
        return loss


def batches(data, shard, batch_size, seed):
    # Equal shards and drop_remainder give every rank the same number of steps.
    dataset = tf.data.Dataset.from_tensor_slices((data.train_images[shard], data.train_labels[shard]))
    return dataset.shuffle(len(shard), seed=seed).batch(batch_size, drop_remainder=True)


def test_accuracy(model, data):
    """Accuracy on the whole test set; each rank scores its share of it."""
    share = np.arange(hvd.rank(), len(data.test_labels), hvd.size())
    predictions = np.argmax(model(data.test_images[share], training=False), axis=1)
    counts = np.array([np.count_nonzero(predictions == data.test_labels[share]), len(share)], np.int64)
    totals = hvd.allreduce(tf.constant(counts), op=hvd.Sum).numpy()
    return totals[0] / totals[1]


def weights_identical_everywhere(model):
    flat = tf.concat([tf.reshape(w, [-1]) for w in model.trainable_variables], axis=0)
    gathered = hvd.allgather(flat[None, :]).numpy()
    return bool(np.all(gathered == gathered[0]))


def main():
    args = parse_args()
    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(1)  # ranks already fill the cores
    rank, size = hvd.rank(), hvd.size()
    data = load_fashion_mnist()
    shard = shard_indices(len(data.train_labels), rank, size)
    keras.utils.set_random_seed(99 + rank)  # different on purpose: the broadcast aligns them
    trainer = Trainer(build_model(), args.lr * size)
    trainer.broadcast_from(root_rank=0)
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        losses = [
            trainer.train_step(images, labels)
            for images, labels in batches(data, shard, args.batch_size, seed=epoch * size + rank)
        ]
        mean_loss = hvd.allreduce(tf.reduce_mean(tf.stack(losses))).numpy()
        accuracy = test_accuracy(trainer.model, data)
        if rank == 0:
            print(
                f"epoch {epoch}: loss {mean_loss:.4f}  test accuracy {accuracy:.2%}  "
                f"({time.perf_counter() - start:.0f}s)",
                flush=True,
            )
    identical = weights_identical_everywhere(trainer.model)
    if rank == 0:
        print("weights identical on all ranks" if identical else "ERROR: ranks hold different weights", flush=True)
    hvd.shutdown()
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
