"""How DistributedOptimizer's buckets are cut (lockstep.common.buckets); the multi-rank
behaviour is in scripts/torch_optimizer.py (check_buckets)."""

import pytest

from lockstep.common.buckets import (
    BUCKET_BYTES_VARIABLE,
    DEFAULT_BUCKET_BYTES,
    FIRST_BUCKET_BYTES,
    bucket_bytes_from_environment,
    plan_buckets,
)

MIB = 1024 * 1024


def test_buckets_run_backwards_with_a_small_first_bucket():
    items = [("cpu", MIB // 2)] * 6 + [("cpu", 30 * MIB)]
    # The last parameter's gradient comes first in backward; it fills the first bucket
    # alone. The rest fill one bucket, still open when the parameters run out.
    assert plan_buckets(items, DEFAULT_BUCKET_BYTES) == [[6], [5, 4, 3, 2, 1, 0]]


def test_first_bucket_closes_at_one_mib_then_at_the_bucket_size():
    items = [("cpu", MIB // 2)] * 8
    assert plan_buckets(items, 3 * MIB // 2) == [[7, 6], [5, 4, 3], [2, 1, 0]]


def test_a_bucket_size_below_the_first_bucket_size_applies_to_the_first_too():
    assert plan_buckets([("cpu", 10)] * 4, 20) == [[3, 2], [1, 0]]


def test_devices_and_dtypes_never_share_a_bucket():
    items = [("float32", 8), ("float64", 8), ("float32", 8), ("float64", 8)]
    assert plan_buckets(items, 16) == [[3, 1], [2, 0]]


def test_zero_means_no_buckets():
    assert plan_buckets([("cpu", 4)] * 3, 0) == []


def test_bucket_size_from_the_environment(monkeypatch):
    monkeypatch.delenv(BUCKET_BYTES_VARIABLE, raising=False)
    assert bucket_bytes_from_environment() == DEFAULT_BUCKET_BYTES == 25 * MIB
    assert FIRST_BUCKET_BYTES == MIB
    monkeypatch.setenv(BUCKET_BYTES_VARIABLE, "4096")
    assert bucket_bytes_from_environment() == 4096
    monkeypatch.setenv(BUCKET_BYTES_VARIABLE, "0")
    assert bucket_bytes_from_environment() == 0
    for bad, fragment in (("-1", ">= 0"), ("lots", "number of bytes")):
        monkeypatch.setenv(BUCKET_BYTES_VARIABLE, bad)
        with pytest.raises(ValueError, match=fragment):
            bucket_bytes_from_environment()
