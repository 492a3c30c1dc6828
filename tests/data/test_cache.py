"""Prepared caches (fedbench/data/cache.py): a prepared data set loads memory-mapped and equal to the raw one, a cache
prepared without verification is not trusted, and groups are kept."""

from __future__ import annotations

import os

import numpy as np
import pytest

import data_fixtures as fx
from fedbench.data import load_dataset
from fedbench.data.provision import prepare_dataset
from fedbench.errors import DataError


def test_prepare_then_memory_mapped_load(mnist_root):
    raw = load_dataset("mnist", mnist_root, use_prepared=False)
    summary = prepare_dataset("mnist", mnist_root)
    assert summary["train"] == 30 and summary["verified"]
    prepared = load_dataset("mnist", mnist_root)
    assert "prepared" in prepared.info and prepared.info["verified"]
    assert isinstance(prepared.train_x, np.memmap)
    np.testing.assert_array_equal(prepared.train_x, raw.train_x)
    np.testing.assert_array_equal(prepared.test_y, raw.test_y)
    assert prepared.meta == raw.meta
    # a different parameter set has no cache; a changed source file invalidates the cache
    source = mnist_root / "mnist" / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz"
    os.utime(source, ns=(5, 5))
    assert "prepared" not in load_dataset("mnist", mnist_root, verify=False).info


def test_cache_prepared_without_verification_is_not_trusted(tmp_path):
    fx.write_mnist_like(tmp_path)
    prepare_dataset("mnist", tmp_path, verify=False)
    assert "prepared" in load_dataset("mnist", tmp_path, verify=False).info
    with pytest.raises(DataError, match="corrupt"):
        load_dataset("mnist", tmp_path)  # verification requested: goes to the files, which do not match


def test_prepared_cache_keeps_groups(tmp_path):
    fx.write_digits5(tmp_path)
    prepare_dataset("digits5", tmp_path, image_size=16)
    arrays = load_dataset("digits5", tmp_path, image_size=16)
    assert "prepared" in arrays.info and arrays.train_groups is not None
    assert arrays.meta.input_shape == (3, 16, 16) and arrays.meta.group_kind == "domain"
