"""The small Fashion-MNIST convnet of the demo, and the batches it trains on."""

import os
import sys

import numpy as np
import torch
from torch import nn


class FashionConvNet(nn.Module):
    """conv 3x3x12 + BN, conv 6x6x24 stride 2 + BN, conv 6x6x32 stride 2, global
    average pool, dense 256 + dropout, dense 10 (ReLU between layers)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 12, 3, padding=1, bias=False),
            nn.BatchNorm2d(12),
            nn.ReLU(),
            nn.Conv2d(12, 24, 6, stride=2, padding=2, bias=False),
            nn.BatchNorm2d(24),
            nn.ReLU(),
            nn.Conv2d(24, 32, 6, stride=2, padding=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.classifier = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Dropout(0.25), nn.Linear(256, 10))

    def forward(self, images):
        return self.classifier(self.features(images))


class BatchSource:
    """An endless cycle of (images, labels) batches for one rank."""

    def __init__(self, images, labels, batch_size):
        self._images = torch.from_numpy(np.ascontiguousarray(images)).unsqueeze(1)
        self._labels = torch.from_numpy(np.ascontiguousarray(labels))
        self._batch_size = batch_size
        self._position = 0

    def next(self):
        end = self._position + self._batch_size
        if end > len(self._labels):
            self._position, end = 0, self._batch_size
        batch = self._images[self._position : end], self._labels[self._position : end]
        self._position = end
        return batch


def synthetic_batches(rank, batch_size, batches=16):
    """Random images and labels, different on every rank; no I/O during timing."""
    generator = np.random.default_rng(1234 + rank)
    images = generator.random((batches * batch_size, 28, 28), dtype=np.float32)
    labels = generator.integers(0, 10, batches * batch_size).astype(np.int64)
    return BatchSource(images, labels, batch_size)


def fashion_mnist_batches(rank, size, batch_size):
    """This rank's shard of the Fashion-MNIST training set, via the demos' reader."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples"))
    from data import load_fashion_mnist, shard_indices

    data = load_fashion_mnist()
    shard = shard_indices(len(data.train_labels), rank, size)
    return BatchSource(data.train_images[shard], data.train_labels[shard], batch_size)
