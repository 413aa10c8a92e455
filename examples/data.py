"""Fashion-MNIST for the demos, read with numpy alone from Debian's IDX files.

Debian's `dataset-fashion-mnist` package installs the four gzip'd IDX files under
/usr/share/datasets/fashion-mnist; set FASHION_MNIST_DIR to read them elsewhere.
"""

import gzip
import os
from typing import NamedTuple

import numpy as np

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
# IDX type codes (third magic byte) and their big-endian element types.
IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class FashionMnist(NamedTuple):
    train_images: np.ndarray  # (60000, 28, 28) float32 in [0, 1]
    train_labels: np.ndarray  # (60000,) int64 in [0, 10)
    test_images: np.ndarray  # (10000, 28, 28) float32 in [0, 1]
    test_labels: np.ndarray  # (10000,) int64 in [0, 10)


def parse_idx(raw, source="<bytes>"):
    """Decode one IDX file's bytes into an array of the shape its header declares."""
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{source}: not an IDX file (bad magic number)")
    type_code, ndim = raw[2], raw[3]
    if type_code not in IDX_DTYPES:
        raise ValueError(f"{source}: unknown IDX element type 0x{type_code:02x}")
    header_size = 4 + 4 * ndim
    if len(raw) < header_size:
        raise ValueError(f"{source}: truncated IDX header")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(IDX_DTYPES[type_code])
    expected = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if len(raw) - header_size != expected:
        raise ValueError(
            f"{source}: header promises {expected} data bytes for shape {shape}, file has {len(raw) - header_size}"
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header_size).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def read_idx_gz(path):
    with gzip.open(path, "rb") as stream:
        return parse_idx(stream.read(), source=path)


def dataset_dir(directory=None):
    directory = directory or os.environ.get("FASHION_MNIST_DIR", DEFAULT_DIR)
    missing = [name for name in FILES.values() if not os.path.isfile(os.path.join(directory, name))]
    if missing:
        raise FileNotFoundError(
            f"Fashion-MNIST not found in {directory} (missing {', '.join(missing)}). "
            "Install it with `apt-get install dataset-fashion-mnist`, or point "
            "FASHION_MNIST_DIR at a folder holding the four IDX .gz files."
        )
    return directory


def load_fashion_mnist(directory=None):
    """All of Fashion-MNIST: images as float32 in [0, 1], labels as int64."""
    directory = dataset_dir(directory)
    arrays = {key: read_idx_gz(os.path.join(directory, name)) for key, name in FILES.items()}
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"{directory}: {split} images {images.shape} do not match labels {labels.shape}")
    return FashionMnist(
        train_images=_scale(arrays["train_images"]),
        train_labels=arrays["train_labels"].astype(np.int64),
        test_images=_scale(arrays["test_images"]),
        test_labels=arrays["test_labels"].astype(np.int64),
    )


def _scale(images):
    return images.astype(np.float32) / np.float32(255.0)


def shard_indices(count, rank, size):
    """Indices rank, rank+size, ... of `count` examples, equally many on every rank.

    Synchronous training needs the same number of steps on every rank (each step
    is a collective), so the last `count % size` examples are left out.
    """
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} is outside [0, {size})")
    per_rank = count // size
    return np.arange(rank, per_rank * size, size, dtype=np.int64)
