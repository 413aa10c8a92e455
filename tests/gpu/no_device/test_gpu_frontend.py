"""The frontend side of the GPU path that needs no GPU: when CUDA tensors are refused
and why, and the one-GPU-per-process rule (lockstep.common.gpu)."""

import threading

import pytest

from lockstep import _core
from lockstep.common import gpu


def test_gpu_tensors_are_refused_with_the_cores_reason_where_the_path_cannot_run():
    info = _core.nccl_info()
    if _core.nccl_built() and info["cuda_devices"] > 0:
        assert gpu.gpu_path_problem() is None
        pytest.skip("this build and machine can run the GPU path")
    problem = gpu.gpu_path_problem()
    assert problem, "no reason given for refusing GPU tensors"
    if info["problem"]:
        assert problem == info["problem"]
    message = gpu.refusal("tensor", "cuda:0")
    assert "tensor is on device cuda:0, but only CPU tensors are supported here" in message
    assert problem in message and "tensor.cpu()" in message


def test_the_first_gpu_pins_the_process():
    pin = gpu.DevicePin()
    assert pin.device is None
    pin.check(1, "tensor")
    pin.check(1, "another tensor")
    assert pin.device == 1
    with pytest.raises(ValueError) as raised:
        pin.check(0, "gradient 'fc.weight'")
    message = str(raised.value)
    assert "gradient 'fc.weight' is on GPU 0" in message and "run on GPU 1" in message
    assert "torch.cuda.set_device(hvd.local_rank())" in message


def test_concurrent_first_uses_pin_one_device():
    """Backward hooks run on autograd's threads: racing first submissions must agree."""
    pin = gpu.DevicePin()
    barrier = threading.Barrier(8)
    failures = []

    def submit(device):
        barrier.wait()
        try:
            pin.check(device, f"tensor on {device}")
        except ValueError:
            failures.append(device)

    threads = [threading.Thread(target=submit, args=(index % 2,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert pin.device in (0, 1)
    assert sorted(failures) == [1 - pin.device] * 4, failures
