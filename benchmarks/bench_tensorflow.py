"""lockstep.tensorflow, side by side with the torch frontend in one job.

    mpirun -np 2 .venv/bin/python benchmarks/bench_tensorflow.py --out results/tf.json

Rounds interleave every variant, so drift hits all of them alike:
- a lone 4-byte allreduce, eagerly (tf and torch) and inside a tf.function, with
  its comparators: the same tf.function without the allreduce (what calling a
  tf.function costs by itself) and a raw 4-byte MPI_Allreduce through mpi4py;
- 50 independent 1 KiB allreduces fetched from one tf.function (fused by the core);
- one training step of a small MLP in a tf.function with DistributedGradientTape,
  against the same step without communication.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import harness  # noqa: E402  (initializes MPI through mpi4py first)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
from mpi4py import MPI  # noqa: E402

import lockstep.tensorflow as hvd  # noqa: E402
import lockstep.torch as hvd_torch  # noqa: E402

INDEPENDENT = 50
BATCH, FEATURES, HIDDEN, CLASSES = 64, 784, 256, 10
# The variants the tf.function latency target compares (summary.py reads these names).
FUNCTION_ALLREDUCE = "tf.function 4 B allreduce"
FUNCTION_NO_OP = "tf.function 4 B no-op (same function, no allreduce)"
RAW_MPI = "MPI_Allreduce (mpi4py) 4 B"
# Variants that take milliseconds run fewer repetitions per round.
HEAVY = {
    f"tf.function {INDEPENDENT} x 1 KiB allreduces",
    "tf.function MLP step, DistributedGradientTape",
    "tf.function MLP step, no communication",
}


def make_variants(context):
    rank = context.rank
    scalar_tf = tf.constant([1.0])
    scalar_torch = torch.ones(1)
    host, received = np.ones(1, np.float32), np.empty(1, np.float32)

    @tf.function
    def allreduce_in_function(x):
        return hvd.allreduce(x, name="bench.fn.scalar")

    @tf.function
    def no_op_function(x):
        return tf.identity(x)

    pieces = [tf.fill([256], float(rank + i)) for i in range(INDEPENDENT)]

    @tf.function
    def independent_allreduces(tensors):
        return [hvd.allreduce(t, op=hvd.Sum) for t in tensors]

    model = tf.keras.Sequential([tf.keras.layers.Dense(HIDDEN, activation="relu"), tf.keras.layers.Dense(CLASSES)])
    model.build((None, FEATURES))
    optimizer = tf.keras.optimizers.SGD(0.01)
    images = tf.random.stateless_normal([BATCH, FEATURES], seed=[rank, 1])
    labels = tf.random.stateless_uniform([BATCH], seed=[rank, 2], maxval=CLASSES, dtype=tf.int32)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def make_step(distributed):
        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(images, training=True))
            if distributed:
                tape = hvd.DistributedGradientTape(tape)
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            return loss

        return step

    train_step, local_step = make_step(True), make_step(False)
    return {
        "tf eager 4 B allreduce": lambda: hvd.allreduce(scalar_tf, name="bench.eager.scalar").numpy(),
        "torch 4 B allreduce": lambda: hvd_torch.allreduce(scalar_torch, name="bench.torch.scalar"),
        FUNCTION_ALLREDUCE: lambda: allreduce_in_function(scalar_tf).numpy(),
        FUNCTION_NO_OP: lambda: no_op_function(scalar_tf).numpy(),
        RAW_MPI: lambda: context.comm.Allreduce(host, received, op=MPI.SUM),
        f"tf.function {INDEPENDENT} x 1 KiB allreduces": lambda: [t.numpy() for t in independent_allreduces(pieces)],
        "tf.function MLP step, DistributedGradientTape": lambda: train_step().numpy(),
        "tf.function MLP step, no communication": lambda: local_step().numpy(),
    }


def main():
    args = harness.parse_args(__doc__)
    context = harness.BenchContext()
    hvd.init()
    rounds, repetitions = (2, 20) if args.quick else (5, 200)
    variants = make_variants(context)
    light = {label: function for label, function in variants.items() if label not in HEAVY}
    heavy = {label: function for label, function in variants.items() if label in HEAVY}
    seconds = harness.run_interleaved(context, light, rounds, repetitions, warmup=5)
    seconds.update(harness.run_interleaved(context, heavy, rounds, repetitions // 4, warmup=5))
    results = {label: harness.summarize(seconds[label]) for label in variants}
    if context.rank == 0:
        print(f"{'variant':52s} {'median':>12s} {'p90':>12s}")
        for label, result in results.items():
            print(f"{label:52s} {result['median_s'] * 1e6:10.1f} us {result['p90_s'] * 1e6:10.1f} us")
    context.write_json(args.out, {"benchmark": "tensorflow", "results": results})
    hvd.shutdown()


if __name__ == "__main__":
    main()
