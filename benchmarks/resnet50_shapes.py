"""The parameter (= gradient) tensor shapes of ResNet-50, in torchvision's order.

161 tensors, 25,557,032 float32 values (97.5 MiB). Written out from the
architecture rather than read from torchvision, so the benchmark needs no model
library: a 7x7 stem, four stages of bottleneck blocks (3, 4, 6, 3 blocks of widths
64, 128, 256, 512, expansion 4, the first block of each stage with a projection
shortcut), and a 2048 -> 1000 classifier. Convolutions have no bias; every batch
norm has a weight and a bias.
"""

STAGE_BLOCKS = (3, 4, 6, 3)
STAGE_WIDTHS = (64, 128, 256, 512)
EXPANSION = 4
NUM_CLASSES = 1000
EXPECTED_TENSORS = 161
EXPECTED_PARAMETERS = 25_557_032


def _conv(name, out_channels, in_channels, kernel):
    return (f"{name}.weight", (out_channels, in_channels, kernel, kernel))


def _batch_norm(name, channels):
    return [(f"{name}.weight", (channels,)), (f"{name}.bias", (channels,))]


def _bottleneck(prefix, in_channels, width, with_projection):
    out_channels = width * EXPANSION
    shapes = [_conv(f"{prefix}.conv1", width, in_channels, 1), *_batch_norm(f"{prefix}.bn1", width)]
    shapes += [_conv(f"{prefix}.conv2", width, width, 3), *_batch_norm(f"{prefix}.bn2", width)]
    shapes += [_conv(f"{prefix}.conv3", out_channels, width, 1), *_batch_norm(f"{prefix}.bn3", out_channels)]
    if with_projection:
        shapes.append(_conv(f"{prefix}.downsample.0", out_channels, in_channels, 1))
        shapes += _batch_norm(f"{prefix}.downsample.1", out_channels)
    return shapes


def named_shapes():
    """[(parameter name, shape)] in the order model.named_parameters() yields them."""
    shapes = [_conv("conv1", 64, 3, 7), *_batch_norm("bn1", 64)]
    in_channels = 64
    for stage, (blocks, width) in enumerate(zip(STAGE_BLOCKS, STAGE_WIDTHS), start=1):
        for block in range(blocks):
            shapes += _bottleneck(f"layer{stage}.{block}", in_channels, width, with_projection=block == 0)
            in_channels = width * EXPANSION
    shapes += [("fc.weight", (NUM_CLASSES, in_channels)), ("fc.bias", (NUM_CLASSES,))]
    _check(shapes)
    return shapes


def _check(shapes):
    total = sum(_elements(shape) for _, shape in shapes)
    if len(shapes) != EXPECTED_TENSORS or total != EXPECTED_PARAMETERS:
        raise AssertionError(f"ResNet-50 table is wrong: {len(shapes)} tensors, {total} parameters")


def _elements(shape):
    count = 1
    for dim in shape:
        count *= dim
    return count


def gradient_order():
    """The shapes in the order backward() produces their gradients: last layer first."""
    return list(reversed(named_shapes()))
