"""Training on the GPU with DistributedOptimizer: equivalent to single-process training
on the full batch (each rank holds a shard; SyncBatchNorm against plain BatchNorm on
the whole batch), with bit-identical parameters on every rank; broadcast_parameters
from differently initialized models; broadcast_optimizer_state of Adam state that lives
on the GPU; grouped and fp16-compressed gradients; gradient buckets (per device and
dtype) ending where per-gradient submission does (bit for bit up to 2 ranks)."""

import os

import torch
import torch.nn.functional as F
from gpu_checks import start
from rank_checks import run_main
from torch_checks import assert_close, assert_identical_across_ranks

import lockstep.torch as hvd

GLOBAL_BATCH = 24  # divisible by 1, 2 and 3 ranks
STEPS = 8
# Sharded and whole-batch convolutions must round alike: no TF32, fixed algorithms.
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False


class Net(torch.nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = norm(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1, stride=2)
        self.bn2 = norm(16)
        self.fc = torch.nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(x.flatten(1))


def full_batch(device):
    generator = torch.Generator().manual_seed(99)
    images = torch.randn(GLOBAL_BATCH, 3, 8, 8, generator=generator)
    labels = torch.randint(0, 10, (GLOBAL_BATCH,), generator=generator)
    return images.to(device), labels.to(device)


def check_equivalent_to_full_batch_training(rank, size, device):
    torch.manual_seed(1234 + rank)  # different on every rank: broadcast_parameters must fix that
    model = Net(hvd.SyncBatchNorm).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    reference = Net(torch.nn.BatchNorm2d).to(device)
    reference.load_state_dict(model.state_dict())
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), named_parameters=model.named_parameters()
    )
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    images, labels = full_batch(device)
    shard = GLOBAL_BATCH // size
    mine = slice(rank * shard, (rank + 1) * shard)
    for _step in range(STEPS):
        optimizer.zero_grad()
        F.cross_entropy(model(images[mine]), labels[mine]).backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        F.cross_entropy(reference(images), labels).backward()
        reference_optimizer.step()
    for (name, value), (_, expected) in zip(model.state_dict().items(), reference.state_dict().items()):
        if value.dtype.is_floating_point:
            assert_close(value.cpu(), expected.cpu(), f"after {STEPS} steps: {name}", atol=2e-5, rtol=1e-4)
    assert all(p.device == device for p in model.parameters())
    assert_identical_across_ranks(hvd, list(model.state_dict().values()), "trained model state")


def check_optimizer_state_broadcast(rank, size, device):
    torch.manual_seed(5)
    model = torch.nn.Linear(6, 3).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    if rank == 0:  # only the root has stepped: its Adam moments exist, on the GPU
        model(torch.randn(4, 6, device=device)).square().sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    state = optimizer.state_dict()["state"]
    assert len(state) == 2, f"rank {rank} holds Adam state for {len(state)} parameters, expected 2"
    moments = [state[index][key] for index in sorted(state) for key in ("exp_avg", "exp_avg_sq")]
    assert all(m.is_cuda for m in moments), [m.device for m in moments]
    assert_identical_across_ranks(hvd, moments + [state[0]["step"].reshape(1).to(device)], "Adam state")


def check_grouped_and_compressed_training(rank, size, device):
    for label, options in [
        ("groups=2", {"groups": 2}),
        ("fp16", {"compression": hvd.Compression.fp16}),
        ("bf16 groups", {"compression": hvd.Compression.bf16, "groups": 3}),
    ]:
        torch.manual_seed(77)
        model = Net(hvd.SyncBatchNorm).to(device)
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.05), named_parameters=model.named_parameters(), **options
        )
        images, labels = full_batch(device)
        shard = GLOBAL_BATCH // size
        mine = slice(rank * shard, (rank + 1) * shard)
        losses = []
        for _ in range(4):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images[mine]), labels[mine])
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        assert all(torch.isfinite(loss) for loss in losses), f"{label}: losses {losses}"
        assert_identical_across_ranks(hvd, list(model.parameters()), f"parameters trained with {label}")


class MixedNet(torch.nn.Module):
    """float32 body, float64 head: buckets are cut per (device, dtype)."""

    def __init__(self):
        super().__init__()
        self.body = Net(torch.nn.BatchNorm2d)
        self.head = torch.nn.Linear(10, 4).double()

    def forward(self, x):
        return self.head(self.body(x).double())


def check_buckets_match_per_gradient_submission(rank, size, device):
    images, labels = full_batch(device)
    shard = GLOBAL_BATCH // size
    mine = slice(rank * shard, (rank + 1) * shard)
    final = {}
    # (LOCKSTEP_GRADIENT_BUCKET_BYTES, groups): small buckets, one bucket per dtype, none
    for label, (bucket_bytes, groups) in {
        "buckets of 256 bytes": ("256", None),
        "default buckets": (None, None),
        "each gradient alone": (None, 0),
    }.items():
        os.environ.pop("LOCKSTEP_GRADIENT_BUCKET_BYTES", None)
        if bucket_bytes is not None:
            os.environ["LOCKSTEP_GRADIENT_BUCKET_BYTES"] = bucket_bytes
        torch.manual_seed(31)
        model = MixedNet().to(device)
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.05), named_parameters=model.named_parameters(), groups=groups
        )
        os.environ.pop("LOCKSTEP_GRADIENT_BUCKET_BYTES", None)
        for _ in range(3):
            optimizer.zero_grad()
            F.cross_entropy(model(images[mine]), labels[mine] % 4).backward()
            optimizer.step()
        final[label] = [p.detach().clone() for p in model.parameters()]
    reference = final["each gradient alone"]
    for label, params in final.items():
        for index, (value, expected) in enumerate(zip(params, reference)):
            assert value.device == device, f"{label}: parameter {index} is on {value.device}"
            if size <= 2 or device.type == "cpu":
                assert torch.equal(value, expected), f"{label}: parameter {index} differs"
            else:  # NCCL's ring adds 3+ summands in an order that depends on the offset in a fused buffer
                if rank == 0 and not torch.equal(value, expected):
                    gap = (value - expected).abs().max().item()
                    print(f"{label}: parameter {index} differs by up to {gap:.3g} from per-gradient", flush=True)
                assert_close(value.cpu(), expected.cpu(), f"{label}: parameter {index}", atol=1e-6, rtol=1e-5)
    assert_identical_across_ranks(hvd, reference, "parameters trained in buckets")


def main():
    rank, size, device = start()
    check_equivalent_to_full_batch_training(rank, size, device)
    check_optimizer_state_broadcast(rank, size, device)
    check_grouped_and_compressed_training(rank, size, device)
    check_buckets_match_per_gradient_submission(rank, size, device)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
