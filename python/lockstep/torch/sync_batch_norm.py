"""SyncBatchNorm: batch normalization with statistics over every rank's batch.

Each rank reduces its batch to per-channel (count, mean, sum of squared
deviations); one Sum-allreduce shares these, and they are combined with the
parallel variance formula, which stays accurate where E[x^2] - E[x]^2 would
cancel. Everything is built from differentiable ops, so autograd derives the
backward pass, in which the allreduce's gradient (a Sum-allreduce) carries every
rank's contribution to the statistics back to the ranks whose inputs produced them.
"""

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from lockstep.common import basics
from lockstep.common.ops import Sum
from lockstep.torch.autograd import allreduce


class SyncBatchNorm(_BatchNorm):
    """Drop-in replacement for BatchNorm1d/2d/3d that normalizes training batches
    with the mean and variance of the batches of all ranks together.

    Evaluation (with running statistics) is local, as in plain batch norm.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"SyncBatchNorm expects an input of at least 2 dimensions (N, C, ...), got {input.dim()}")

    def forward(self, input):
        self._check_input_dim(input)
        uses_batch_statistics = self.training or self.running_mean is None
        if not uses_batch_statistics or basics.size() == 1:
            return super().forward(input)
        mean, variance, count = _global_statistics(input)
        if self.training and self.track_running_stats:
            self._update_running_statistics(mean, variance, count)
        return self._normalize(input, mean, variance)

    def _update_running_statistics(self, mean, variance, count):
        self.num_batches_tracked.add_(1)
        factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        # count is a 0-d float64 tensor on the input's device: reading it on the host
        # would stall a GPU step. Its ratio rounds to variance's dtype as a Python
        # float's would.
        unbiased = variance * (count / (count - 1))
        with torch.no_grad():
            self.running_mean.mul_(1 - factor).add_(mean.detach().to(self.running_mean.dtype), alpha=factor)
            self.running_var.mul_(1 - factor).add_(unbiased.detach().to(self.running_var.dtype), alpha=factor)

    def _normalize(self, input, mean, variance):
        shape = [1, -1] + [1] * (input.dim() - 2)
        work = input.to(mean.dtype)
        output = (work - mean.view(shape)) * torch.rsqrt(variance + self.eps).view(shape)
        if self.affine:
            output = output * self.weight.to(mean.dtype).view(shape) + self.bias.to(mean.dtype).view(shape)
        return output.to(input.dtype)


def _global_statistics(input):
    """Per-channel mean, biased variance and element count (a 0-d float64 tensor) over
    all ranks' inputs."""
    channels = input.shape[1]
    dtype = torch.float64 if input.dtype == torch.float64 else torch.float32
    work = input.to(dtype)
    dims = [0] + list(range(2, input.dim()))
    local_count = input.numel() // channels if channels else 0
    if local_count > 0:
        local_mean = work.mean(dim=dims)
        deviations = work - local_mean.view([1, -1] + [1] * (input.dim() - 2))
        local_m2 = (deviations * deviations).sum(dim=dims)
    else:  # a rank may hold an empty batch; it contributes nothing
        local_mean = work.new_zeros(channels)
        local_m2 = work.new_zeros(channels)
    counts = work.new_full((channels,), float(local_count))
    local = torch.stack([counts, local_mean, local_m2]).unsqueeze(0)
    # Each rank fills only its own row, so a Sum-allreduce gathers all rows.
    rows = [local if rank == basics.rank() else torch.zeros_like(local) for rank in range(basics.size())]
    gathered = allreduce(torch.cat(rows), op=Sum)
    all_counts, all_means, all_m2 = gathered[:, 0].detach(), gathered[:, 1], gathered[:, 2]
    total = all_counts.sum(dim=0)
    # More than one local value guarantees more than one in all; only otherwise is the
    # global count read on the host (which waits for a GPU).
    if channels == 0 or local_count <= 1:
        count = float(total[0]) if channels else 0.0
        if count <= 1:
            raise ValueError(f"SyncBatchNorm needs more than 1 value per channel across all ranks, got {count:g}")
    mean = (all_counts * all_means).sum(dim=0) / total
    m2 = all_m2.sum(dim=0) + (all_counts * (all_means - mean) ** 2).sum(dim=0)
    return mean, m2 / total, total[0].to(torch.float64)
