"""ResNet-50 built from torch.nn alone (the GPU machine has no torchvision), following
the same architecture description as resnet50_shapes.py: a 7x7 stem, bottleneck
stages of 3, 4, 6 and 3 blocks (widths 64-512, expansion 4, stride 2 from the second
stage on, a projection shortcut in each stage's first block) and a 1000-way
classifier. Its parameters are exactly the 161 tensors of resnet50_shapes, in the
same order (checked on construction).
"""

import torch
from resnet50_shapes import EXPANSION, NUM_CLASSES, STAGE_BLOCKS, STAGE_WIDTHS, named_shapes
from torch import nn


class Bottleneck(nn.Module):
    def __init__(self, in_channels, width, stride, with_projection):
        super().__init__()
        out_channels = width * EXPANSION
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.downsample = None
        if with_projection:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        return torch.relu(self.bn3(self.conv3(y)) + shortcut)


class ResNet50(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        in_channels = 64
        for stage, (blocks, width) in enumerate(zip(STAGE_BLOCKS, STAGE_WIDTHS), start=1):
            layers = []
            for block in range(blocks):
                stride = 2 if stage > 1 and block == 0 else 1
                layers.append(Bottleneck(in_channels, width, stride, with_projection=block == 0))
                in_channels = width * EXPANSION
            setattr(self, f"layer{stage}", nn.Sequential(*layers))
        self.fc = nn.Linear(in_channels, NUM_CLASSES)
        mine = [(name, tuple(p.shape)) for name, p in self.named_parameters()]
        if mine != [(name, tuple(shape)) for name, shape in named_shapes()]:
            raise AssertionError("ResNet50 does not match resnet50_shapes")

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.nn.functional.max_pool2d(x, 3, stride=2, padding=1)
        for stage in range(1, len(STAGE_BLOCKS) + 1):
            x = getattr(self, f"layer{stage}")(x)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))
