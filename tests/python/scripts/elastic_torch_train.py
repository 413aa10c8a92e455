"""An elastic torch job for the elastic tests: linear regression with momentum SGD on
a fixed dataset, an ElasticSampler, and a commit every COMMIT_EVERY steps.

    elastic_torch_train.py                        under lockstep-run's elastic supervisor
    elastic_torch_train.py --reference HISTORY    the same training in one process, with
                                                   the ranks simulated: HISTORY is
                                                   "size@commit,size@commit,..." (the
                                                   membership from that commit on)

The state carries `trained`, how often each sample was trained (the ranks' one-hot
counts are summed each step), so a commit rolls it back with the model. Rank 0 prints
one line per step and, at the end, a JSON line with the parameters and counts.

Steps take no extra time (LOCKSTEP_TEST_STEP_SECONDS paces them, for a benchmark); a
test that acts on the running job holds it at a commit until it has (elastic_hold.py).
With LOCKSTEP_TEST_LARGE_AFTER_HOLD set, the ranks run large allreduces once released
(before that commit, which they leave out of the model), for a test that cuts a host
off in the middle of a data collective. LOCKSTEP_TEST_RAISE_ON_RANKS=1,2 makes those
ranks raise ValueError (a bug) at their commit after LOCKSTEP_TEST_RAISE_AT commits
(default 2), in the first job only.
"""

import json
import math
import os
import socket
import sys
import time

import numpy as np
import torch
from elastic_hold import hold

SAMPLES, FEATURES, BATCH, EPOCHS, COMMIT_EVERY = 64, 5, 2, 2, 2
STEP_SECONDS = float(os.environ.get("LOCKSTEP_TEST_STEP_SECONDS", "0"))
torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def dataset():
    rng = np.random.default_rng(11)
    inputs = rng.standard_normal((SAMPLES, FEATURES))
    targets = inputs @ np.arange(1.0, FEATURES + 1) + 0.1 * rng.standard_normal(SAMPLES)
    return torch.from_numpy(inputs), torch.from_numpy(targets)


def make_model():
    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def local_gradient(model, inputs, targets, indices):
    model.zero_grad()
    prediction = model(inputs[indices]).squeeze(1)
    torch.nn.functional.mse_loss(prediction, targets[indices]).backward()
    return model.weight.grad.clone()


def epoch_loop(state, world, inputs, targets):
    """Trains until the last epoch; returns early when `world.commit` says so."""
    while state.epoch < EPOCHS:
        shares = world.shares(state.sampler)
        steps = math.ceil(len(shares[0]) / BATCH)
        for step in range(steps):
            batches = [share[step * BATCH : (step + 1) * BATCH] for share in shares]
            world.step(state, batches, inputs, targets)
            state.sampler.record_batch(step, BATCH)
            if step % COMMIT_EVERY == COMMIT_EVERY - 1 and world.commit(state):
                return False
        state.epoch += 1
        state.sampler.set_epoch(state.epoch)
        if world.commit(state):
            return False
    return True


def one_hot_counts(batches):
    counts = np.zeros(SAMPLES, np.int64)
    for batch in batches:
        np.add.at(counts, batch, 1)
    return counts


def run_elastic():
    import lockstep.torch as hvd

    hvd.init()
    rank, size = hvd.rank(), hvd.size()  # asked once: a rank that finishes first shuts lockstep down
    inputs, targets = dataset()
    model, optimizer = make_model()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(range(SAMPLES), shuffle=True, seed=7)
    state = hvd.elastic.TorchState(
        model, optimizer, sampler=sampler, epoch=0, commits=0, trained=np.zeros(SAMPLES, np.int64)
    )

    class World:
        trained_here = 0  # samples this process trained, for the test to see each host's share

        def shares(self, sampler):
            return [list(iter(sampler))]

        def step(self, state, batches, inputs, targets):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(inputs[batches[0]]).squeeze(1), targets[batches[0]]).backward()
            optimizer.step()
            World.trained_here += len(batches[0])
            local = torch.from_numpy(one_hot_counts(batches))
            state.trained = state.trained + hvd.allreduce(local, op=hvd.Sum, name="trained").numpy()
            if hvd.rank() == 0:
                print(f"[train] size {hvd.size()} epoch {state.epoch} commits {state.commits}", flush=True)
                if os.environ.get("LOCKSTEP_TEST_STARTED_FILE"):
                    open(os.environ["LOCKSTEP_TEST_STARTED_FILE"], "a").close()
            if STEP_SECONDS:
                time.sleep(STEP_SECONDS)

        def commit(self, state):
            raise_at = int(os.environ.get("LOCKSTEP_TEST_RAISE_AT", "2"))
            if state.commits == raise_at and str(rank) in os.environ.get("LOCKSTEP_TEST_RAISE_ON_RANKS", "").split(","):
                if os.environ.get("LOCKSTEP_ELASTIC_GENERATION", "0") == "0":
                    raise ValueError(f"a bug on rank {rank}")
            if hold(state.commits, rank) and os.environ.get("LOCKSTEP_TEST_LARGE_AFTER_HOLD"):
                large_allreduces(hvd, rank)
            state.commits += 1
            state.commit()
            return False

    @hvd.elastic.run
    def train(state):
        if hvd.rank() == 0:
            print(f"[train] start size {hvd.size()} commits {state.commits} epoch {state.epoch}", flush=True)
        epoch_loop(state, World(), inputs, targets)

    train(state)
    print(f"[share] rank {rank} host {socket.gethostname()} trained {World.trained_here}", flush=True)
    if rank == 0:
        print(
            "[result] "
            + json.dumps(
                {"weights": model.weight.detach().flatten().tolist(), "trained": state.trained.tolist(), "size": size}
            ),
            flush=True,
        )


def large_allreduces(hvd, rank, count=40):
    data = torch.ones(1 << 20)  # 8 MiB of float64: most of the time goes to moving it
    if rank == 0:
        print(f"[hold] rank {rank} starts large allreduces", flush=True)
    for i in range(count):
        hvd.allreduce(data, name=f"large.{i}")


def run_reference(history):
    """The same training, never interrupted, with `history`'s membership: [(size, from commit)]."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
    from lockstep.torch.elastic.sampler import ElasticSampler, rank_indices

    inputs, targets = dataset()
    model, optimizer = make_model()

    class ReferenceSampler(ElasticSampler):
        size = history[0][0]

        def reset(self):
            self.repartition(0, self.size)

    class State:
        pass

    state = State()
    state.epoch, state.commits, state.trained = 0, 0, np.zeros(SAMPLES, np.int64)
    state.sampler = ReferenceSampler(range(SAMPLES), shuffle=True, seed=7)

    class World:
        def shares(self, sampler):
            count = sampler.num_replicas
            return [rank_indices(sampler.remaining_indices, r, count) for r in range(count)]

        def step(self, state, batches, inputs, targets):
            gradients = [local_gradient(model, inputs, targets, batch) for batch in batches]
            model.weight.grad = sum(gradients) / len(gradients)
            optimizer.step()
            state.trained = state.trained + one_hot_counts(batches)

        def commit(self, state):
            state.commits += 1
            changes = [size for size, at in history[1:] if at == state.commits]
            if changes:
                ReferenceSampler.size = changes[-1]
                state.sampler.reset()
            return bool(changes)

    while not epoch_loop(state, World(), inputs, targets):
        pass
    print(
        "[result] "
        + json.dumps({"weights": model.weight.detach().flatten().tolist(), "trained": state.trained.tolist()}),
        flush=True,
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--reference"]:
        run_reference([tuple(int(x) for x in part.split("@")) for part in sys.argv[2].split(",")])
    else:
        run_elastic()
