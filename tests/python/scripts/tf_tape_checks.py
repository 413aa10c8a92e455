"""DistributedGradientTape: N ranks on N shards of a batch take the same steps as
one process on the whole batch, eagerly and in tf.function, with dense and
tf.IndexedSlices (embedding) gradients, compression and predivision."""

import numpy as np
import tensorflow as tf

import lockstep.tensorflow as hvd

BATCH, FEATURES, OUTPUTS, VOCABULARY, IDS_PER_ROW = 12, 5, 2, 10, 3
LEARNING_RATE, STEPS = 0.1, 3


class TinyModel:
    """A dense layer plus an embedding bag: the embedding's gradient is IndexedSlices."""

    def __init__(self):
        init = np.random.RandomState(7)
        self.dense = tf.Variable(init.randn(FEATURES, OUTPUTS).astype(np.float32))
        self.embedding = tf.Variable(init.randn(VOCABULARY, OUTPUTS).astype(np.float32))
        self.variables = [self.dense, self.embedding]

    def loss(self, features, ids, targets):
        outputs = features @ self.dense + tf.reduce_sum(tf.gather(self.embedding, ids), axis=1)
        return tf.reduce_mean(tf.square(outputs - targets))

    def apply(self, gradients):
        for variable, gradient in zip(self.variables, gradients):
            variable.assign_sub(LEARNING_RATE * tf.convert_to_tensor(gradient))

    def weights(self):
        return [variable.numpy() for variable in self.variables]


def full_batch():
    data = np.random.RandomState(11)
    return (
        data.randn(BATCH, FEATURES).astype(np.float32),
        data.randint(0, VOCABULARY, size=(BATCH, IDS_PER_ROW)).astype(np.int64),
        data.randn(BATCH, OUTPUTS).astype(np.float32),
    )


def shard(batch, rank, size):
    rows = BATCH // size
    return tuple(part[rank * rows : (rank + 1) * rows] for part in batch)


def reference_weights(batch, scale=1.0):
    """One process, whole batch, plain tf.GradientTape; scale multiplies gradients."""
    model = TinyModel()
    for _ in range(STEPS):
        with tf.GradientTape() as tape:
            loss = model.loss(*batch)
        model.apply([scale * tf.convert_to_tensor(g) for g in tape.gradient(loss, model.variables)])
    return model.weights()


def train_distributed(batch, in_function, **tape_options):
    model = TinyModel()
    gradient_types = []

    def step(features, ids, targets):
        with tf.GradientTape() as tape:
            loss = model.loss(features, ids, targets)
        gradients = hvd.DistributedGradientTape(tape, **tape_options).gradient(loss, model.variables)
        gradient_types.append(type(gradients[1]))
        model.apply(gradients)

    run_step = tf.function(step) if in_function else step
    for _ in range(STEPS):
        run_step(*[tf.constant(part) for part in batch])
    return model.weights(), gradient_types


def assert_close(actual, expected, what, tolerance):
    for index, (got, want) in enumerate(zip(actual, expected)):
        error = np.max(np.abs(got - want)) / max(1.0, np.max(np.abs(want)))
        assert error <= tolerance, f"{what}: variable {index} differs from one process by {error:.3g}"


def assert_same_on_all_ranks(weights, what):
    flat = np.concatenate([w.ravel() for w in weights])
    gathered = hvd.allgather(tf.constant(flat[None, :])).numpy()
    assert np.all(gathered == gathered[0]), f"{what}: weights differ across ranks"


def check_distributed_gradient_tape(rank, size):
    batch = full_batch()
    mine = shard(batch, rank, size)
    expected = reference_weights(batch)
    variants = [
        ("eager, gathered IndexedSlices", False, {}, 1e-5, tf.IndexedSlices),
        ("tf.function, gathered IndexedSlices", True, {}, 1e-5, tf.IndexedSlices),
        ("tf.function, sparse_as_dense", True, {"sparse_as_dense": True}, 1e-5, tf.Tensor),
        ("eager, predivide 2", False, {"gradient_predivide_factor": 2.0}, 1e-5, tf.IndexedSlices),
        (
            "tf.function, fp16 compression",
            True,
            {"compression": hvd.Compression.fp16, "sparse_as_dense": True},
            1e-2,
            tf.Tensor,
        ),
        (
            "eager, bf16 compression",
            False,
            {"compression": hvd.Compression.bf16, "sparse_as_dense": True},
            3e-2,
            tf.Tensor,
        ),
    ]
    for what, in_function, options, tolerance, embedding_gradient in variants:
        weights, gradient_types = train_distributed(mine, in_function, **options)
        assert_close(weights, expected, what, tolerance)
        assert_same_on_all_ranks(weights, what)
        assert issubclass(gradient_types[0], embedding_gradient), f"{what}: embedding gradient {gradient_types[0]}"
    summed, _ = train_distributed(mine, False, op=hvd.Sum, sparse_as_dense=True)
    assert_close(summed, reference_weights(batch, scale=float(size)), "op=Sum", 1e-5)


def check_tape_as_context_manager(rank, size):
    x = tf.Variable([1.0, 2.0])
    with hvd.DistributedGradientTape(tf.GradientTape()) as tape:
        loss = tf.reduce_sum(x * x) * float(rank + 1)
    gradient = tape.gradient(loss, x).numpy()
    mean_weight = (size + 1) / 2
    np.testing.assert_allclose(gradient, 2 * mean_weight * np.array([1.0, 2.0]), rtol=1e-6)
    assert tape.watched_variables() == (x,), "other tape methods reach the wrapped tape"
