"""What every GPU rank script shares: pinning the rank's GPU, moving the CPU suite's
exact inputs and expected values to the device, and strict comparisons of device
results (device, dtype, shape and values)."""

import torch
import torch_checks  # noqa: F401 - one CPU thread per rank, set before torch loads
from torch_checks import assert_tensor_equal, to_torch

import lockstep.torch as hvd


def start():
    """hvd.init(), then the rank's GPU as Horovod documents it. Ranks outnumber the
    machine's GPUs in this suite (several share one), hence the modulo."""
    hvd.init()
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    return hvd.rank(), hvd.size(), torch.device("cuda", torch.cuda.current_device())


def on_gpu(array):
    """A CUDA tensor of a numpy array's values (a fresh copy, contiguous)."""
    return to_torch(array).cuda()


def assert_gpu_result(actual, expected, what, device=None):
    """`actual` is a CUDA tensor (on `device` if given) with exactly `expected`'s values."""
    assert isinstance(actual, torch.Tensor), f"{what}: expected a torch.Tensor, got {type(actual).__name__}"
    assert actual.is_cuda, f"{what}: the result is on {actual.device}, expected a CUDA tensor"
    if device is not None:
        assert actual.device == device, f"{what}: the result is on {actual.device}, expected {device}"
    if isinstance(expected, torch.Tensor):
        expected = expected.cpu()
    assert_tensor_equal(actual.cpu(), expected, what)


def load_kernels(device, elements):
    """Runs once each torch kernel that a timed window of these scripts launches.
    CUDA loads kernels lazily (CUDA_MODULE_LOADING=LAZY is the default), and loading
    one may synchronize the context: inside a window that would wait out the very
    GPU work whose overlap is being observed."""
    values = torch.full((elements,), 3.0, device=device)
    (values * 2).sum()
    values * 1
    torch.cuda._sleep(1)
    torch.cuda.synchronize()
