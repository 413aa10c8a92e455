"""What every frontend's GPU (CUDA) tensors share, whatever the framework.

Whether this build and machine can run collectives on device memory is the core's
answer (nccl_built(), nccl_info()), asked once per process: the core probes CUDA and
NCCL once too. One process drives one GPU, as in Horovod (pin it with
torch.cuda.set_device(hvd.local_rank()) before the first GPU op): the device of the
first GPU tensor a process submits is the one every later GPU tensor must be on.
The core checks that as well; checking here too names the frontend's argument.
"""

import threading

from lockstep import _core

_NOT_YET = "lockstep's GPU collectives are not implemented yet"
_problem = None  # "" once known to be none


def gpu_path_problem():
    """None where CUDA tensors can be submitted, else why not (for an error message).

    A build without GPU collectives (nccl_built() == 0) or a machine where the driver
    shows no device refuses them here. Anything subtler (no libnccl but CUDA works,
    which the core stages through host memory) is the core's to decide at submission.
    """
    global _problem
    if _problem is None:
        info = _core.nccl_info()
        if not _core.nccl_built():
            _problem = info["problem"] or _NOT_YET
        elif info["cuda_devices"] == 0:
            _problem = info["problem"] or "the CUDA driver shows no GPU"
        else:
            _problem = ""
    return _problem or None


def refusal(what, device):
    """The message for a GPU tensor where the GPU path cannot run."""
    return (
        f"{what} is on device {device}, but only CPU tensors are supported here "
        f"(GPU: {gpu_path_problem()}); move it with tensor.cpu()"
    )


class DevicePin:
    """The one CUDA device this process's GPU collectives run on: the first one used."""

    def __init__(self):
        self._lock = threading.Lock()
        self._device = None

    @property
    def device(self):
        """The pinned ordinal, or None before the first GPU op."""
        return self._device

    def check(self, device, what):
        """Pin `device` on first use; ValueError for any other device afterwards."""
        pinned = self._device
        if pinned is None:
            with self._lock:
                if self._device is None:
                    self._device = device
                pinned = self._device
        if device != pinned:
            raise ValueError(
                f"{what} is on GPU {device}, but this process's GPU collectives run on GPU {pinned} (the device "
                "of its first GPU tensor): lockstep drives one GPU per process. Launch one process per GPU and "
                "pin each with torch.cuda.set_device(hvd.local_rank()) before creating tensors"
            )


DEVICE_PIN = DevicePin()
