"""Torch counterparts of rank_checks: dtype tables, numpy <-> torch conversion
(bfloat16 included), strict tensor comparisons and bitwise agreement across ranks.

Expected values are computed with rank_checks' numpy helpers and converted, so
the torch tests check against the same exact definitions as the numpy ones.
"""

import os

# One thread per rank: ranks outnumber the cores. Must be set before torch loads.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from rank_checks import BFLOAT16, assert_equal  # noqa: E402

torch.set_num_threads(1)

NUMPY_DTYPES = {
    torch.uint8: np.dtype(np.uint8),
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.float16: np.dtype(np.float16),
    torch.bfloat16: BFLOAT16,
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.bool: np.dtype(np.bool_),
}
ALL_DTYPES = list(NUMPY_DTYPES)
NUMERIC_DTYPES = [dtype for dtype in ALL_DTYPES if dtype != torch.bool]


def to_torch(array):
    """A fresh, writable torch tensor with the values of a numpy array."""
    array = np.array(array, order="C")  # a copy; keeps 0-d arrays 0-d
    if array.dtype == BFLOAT16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def to_numpy(tensor):
    tensor = tensor.detach().contiguous()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(BFLOAT16)
    return tensor.numpy()


def assert_tensor_equal(actual, expected, what):
    """A torch tensor with the dtype, shape and exact values of `expected` (numpy or torch)."""
    assert isinstance(actual, torch.Tensor), f"{what}: expected a torch.Tensor, got {type(actual).__name__}"
    if isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, expected {expected.dtype}"
        expected = to_numpy(expected)
    assert_equal(to_numpy(actual), expected, what)


def assert_close(actual, expected, what, atol=1e-5, rtol=1e-5):
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    if not torch.allclose(actual, expected, atol=atol, rtol=rtol):
        difference = (actual - expected).abs().max().item()
        raise AssertionError(
            f"{what}: differs by up to {difference:.3g} (atol {atol}, rtol {rtol})\n"
            f"got      {actual.flatten()[:6]}\nexpected {expected.flatten()[:6]}"
        )


def assert_identical_across_ranks(hvd, tensors, what):
    """Every rank holds bit-for-bit the same tensors (compared as raw bytes)."""
    flat = torch.cat([t.detach().contiguous().view(-1).view(torch.uint8) for t in tensors])
    gathered = hvd.allgather(flat.unsqueeze(0), name=f"identical.{what}")
    differing = [rank for rank in range(len(gathered)) if not torch.equal(gathered[rank], gathered[0])]
    assert not differing, f"{what}: ranks {differing} hold different bytes than rank 0"
