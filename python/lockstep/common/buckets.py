"""Gradient buckets: when a DistributedOptimizer hands gradients to the core.

Submitting each gradient the moment backward produces it starts a negotiation cycle
per gradient, each waiting for the other ranks to reach the same point of their
backward pass. On a host where the background thread shares cores with the training
threads, those cycles cost more than they overlap (docs/PERFORMANCE.md, "Gradient
buckets"). So, as torch DDP does, parameters are cut into buckets in reverse order
(the order backward roughly produces their gradients), and a bucket's allreduces are
handed over together once all its gradients are ready. Each gradient is still its own
allreduce under its own name, as in Horovod: only the moment of submission changes,
never the result.
"""

import os

from lockstep.common import validation

BUCKET_BYTES_VARIABLE = "LOCKSTEP_GRADIENT_BUCKET_BYTES"
# torch DDP's defaults: a small first bucket, so that the first allreduce starts
# early in the backward pass, then 25 MiB.
DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024
FIRST_BUCKET_BYTES = 1024 * 1024


def bucket_bytes_from_environment():
    """The bucket size LOCKSTEP_GRADIENT_BUCKET_BYTES asks for (0: no buckets)."""
    text = os.environ.get(BUCKET_BYTES_VARIABLE, "").strip()
    if not text:
        return DEFAULT_BUCKET_BYTES
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{BUCKET_BYTES_VARIABLE} must be a number of bytes, got {text!r}") from None
    if value < 0:
        raise ValueError(f"{BUCKET_BYTES_VARIABLE} must be >= 0, got {value}")
    return value


def plan_buckets(items, bucket_bytes):
    """Buckets of indices into `items`, a sequence of (key, nbytes) in the order the
    parameters were given. Indices are taken in reverse order; only items with equal
    keys (device and dtype) share a bucket; a bucket closes once it holds at least
    bucket_bytes (the first to close: FIRST_BUCKET_BYTES, if smaller). bucket_bytes 0:
    no buckets."""
    bucket_bytes = validation.as_int(bucket_bytes, "bucket_bytes")
    if bucket_bytes <= 0:
        return []
    first_cap = min(bucket_bytes, FIRST_BUCKET_BYTES)
    open_buckets = {}  # key -> [indices, bytes]
    closed = []
    for index in reversed(range(len(items))):
        key, nbytes = items[index]
        bucket = open_buckets.setdefault(key, [[], 0])
        bucket[0].append(index)
        bucket[1] += nbytes
        if bucket[1] >= (bucket_bytes if closed else first_cap):
            closed.append(bucket[0])
            del open_buckets[key]
    return closed + [indices for indices, _ in open_buckets.values()]
