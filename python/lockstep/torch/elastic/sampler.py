"""ElasticSampler: Horovod's torch sampler that repartitions what is left of the
epoch whenever the job's membership changes.

Progress is one number shared by every rank, `processed_num` (samples of this epoch's
shuffled order already trained, counted over all ranks), so the state is the same
on every rank and one holder's commit restores everyone's place.
"""

import math
import random

import torch.utils.data

from lockstep.common import basics


def epoch_order(length, shuffle, seed, epoch):
    """This epoch's order of the dataset's indices: the same on every rank."""
    indices = list(range(length))
    if shuffle:
        random.Random(seed + epoch).shuffle(indices)
    return indices


def rank_indices(remaining, rank, num_replicas):
    """`rank`'s share of `remaining`: every num_replicas-th index from `rank`, padded
    with the first indices so that every rank gets the same count (ranks must run the
    same number of steps)."""
    per_rank = int(math.ceil(len(remaining) / num_replicas)) if remaining else 0
    padded = remaining + remaining[: per_rank * num_replicas - len(remaining)]
    return padded[rank : per_rank * num_replicas : num_replicas]


class ElasticSampler(torch.utils.data.Sampler):
    """Partitions the dataset across ranks and, after a reset, the part of the epoch
    not yet trained across the new ranks.

    Put it in the TorchState, call `record_batch(batch_idx, batch_size)` after each
    batch and `set_epoch(epoch)` at the end of each epoch (not the start, so a
    partly trained epoch is not trained again).
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Count one batch of `batch_size` samples on every rank as trained."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        self.repartition(basics.rank(), basics.size())

    def repartition(self, rank, num_replicas):
        """Share what is left of the epoch among `num_replicas` ranks (reset() passes
        this job's; a test can pass any)."""
        self.rank, self.num_replicas = rank, num_replicas
        order = epoch_order(len(self.dataset), self.shuffle, self.seed, self.epoch)
        self.remaining_indices = order[self.processed_num :]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / num_replicas))
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        self.indices = rank_indices(self.remaining_indices, self.rank, self.num_replicas)
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
