"""Data-parallel Keras 3 training of a small convnet on Fashion-MNIST with lockstep.keras.

    mpirun -np 2 python examples/keras_fashion_mnist.py [--epochs 4]
    KERAS_BACKEND=torch mpirun -np 2 python examples/keras_fashion_mnist.py

The model is the convnet of Keras' multi-GPU training guide. Each rank fits its own
shard of the training set; DistributedOptimizer averages gradients every step,
BroadcastGlobalVariablesCallback starts every rank from rank 0's weights,
MetricAverageCallback reports metrics averaged over ranks, and the learning rate
(scaled by the number of ranks) is warmed up over the first epoch and lowered for
the last one. Only rank 0
prints. The script exits non-zero unless every rank ends with identical weights.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import time  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
from data import load_fashion_mnist, shard_indices  # noqa: E402

import lockstep.keras as hvd  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128, help="examples per rank per step")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate for one rank")
    parser.add_argument("--warmup-epochs", type=int, default=1)
    parser.add_argument(
        "--decay-epochs", type=int, default=1, help="final epochs trained at a quarter of the learning rate"
    )
    parser.add_argument("--threads", type=int, default=1, help="compute threads per rank")
    args = parser.parse_args()
    if min(args.epochs, args.batch_size, args.threads) < 1 or args.lr <= 0:
        parser.error("--epochs, --batch-size, --threads and --lr must be positive")
    return args


def limit_threads(threads):
    # Ranks already fill the cores; more threads per rank would only compete.
    if keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(threads)
    elif keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(2)


def build_model():
    """The convnet from Keras' "Multi-GPU distributed training" guides."""
    inputs = keras.Input(shape=(28, 28, 1))
    x = keras.layers.Conv2D(12, 3, padding="same", use_bias=False)(inputs)
    x = keras.layers.BatchNormalization(scale=False, center=True, momentum=0.9)(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.Conv2D(24, 6, strides=2, use_bias=False)(x)
    x = keras.layers.BatchNormalization(scale=False, center=True, momentum=0.9)(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.Conv2D(32, 6, strides=2, padding="same")(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(256, activation="relu")(x)
    x = keras.layers.Dropout(0.5)(x)
    outputs = keras.layers.Dense(10)(x)
    return keras.Model(inputs, outputs)


def test_accuracy(model, data):
    """Accuracy on the whole test set; each rank scores its share of it."""
    share = np.arange(hvd.rank(), len(data.test_labels), hvd.size())
    logits = model.predict(data.test_images[share, ..., None], batch_size=500, verbose=0)
    correct = np.count_nonzero(np.argmax(logits, axis=1) == data.test_labels[share])
    totals = keras.ops.convert_to_numpy(hvd.allreduce(np.array([correct, len(share)], np.int64), op=hvd.Sum))
    return totals[0] / totals[1]


def average_batch_norm_statistics(model):
    """Batch norm's moving statistics come from each rank's own batches (only
    gradients are averaged); average them so every rank holds one model."""
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            for variable in (layer.moving_mean, layer.moving_variance):
                variable.assign(hvd.allreduce(variable, op=hvd.Average))


def weights_identical_everywhere(model):
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    digests = hvd.allgather_object(digest.hexdigest())
    return all(d == digests[0] for d in digests)


def main():
    args = parse_args()
    hvd.init()
    limit_threads(args.threads)
    rank, size = hvd.rank(), hvd.size()
    data = load_fashion_mnist()
    shard = shard_indices(len(data.train_labels), rank, size)
    keras.utils.set_random_seed(1234 + rank)  # different on purpose: the broadcast aligns them

    scaled_lr = args.lr * size
    model = build_model()
    model.compile(
        optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(scaled_lr)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    callbacks = [
        hvd.BroadcastGlobalVariablesCallback(0),
        hvd.MetricAverageCallback(),  # before anything that reads the epoch's metrics
        hvd.LearningRateWarmupCallback(scaled_lr, warmup_epochs=args.warmup_epochs, verbose=int(rank == 0)),
        # A lower rate for the last epochs settles the weights into a better minimum.
        hvd.LearningRateScheduleCallback(
            scaled_lr, multiplier=0.25, start_epoch=max(args.warmup_epochs, args.epochs - args.decay_epochs)
        ),
    ]
    if rank == 0:
        print(
            f"{size} ranks on Keras' {keras.backend.backend()} backend, {len(shard)} training examples "
            f"each, batch {args.batch_size} per rank, lr {scaled_lr:g}",
            flush=True,
        )
    start = time.perf_counter()
    model.fit(
        data.train_images[shard, ..., None],
        data.train_labels[shard],
        batch_size=args.batch_size,
        epochs=args.epochs,
        callbacks=callbacks,
        verbose=2 if rank == 0 else 0,
    )
    train_seconds = time.perf_counter() - start
    average_batch_norm_statistics(model)
    accuracy = test_accuracy(model, data)
    identical = weights_identical_everywhere(model)
    if rank == 0:
        print(f"test accuracy {accuracy:.2%} after {args.epochs} epochs ({train_seconds:.0f}s of training)")
        print("weights identical on all ranks" if identical else "ERROR: ranks hold different weights", flush=True)
    hvd.shutdown()
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
