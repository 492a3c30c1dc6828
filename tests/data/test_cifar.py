"""The CIFAR loaders (fedbench/data/cifar.py) read tiny files written in the official formats: CIFAR-10's and
CIFAR-100's python pickles."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import data_fixtures as fx
from data_fixtures import check_arrays
from fedbench.data import cifar, load_dataset
from fedbench.data.files import file_digest
from fedbench.errors import ConfigError, DataError


def test_cifar10_pickles(tmp_path, monkeypatch):
    written = fx.write_cifar10(tmp_path)
    root = tmp_path / "cifar10"
    monkeypatch.setattr(
        cifar,
        "CIFAR10_FILES",
        tuple(dataclasses.replace(f, md5=file_digest(root / f.path)) for f in cifar.CIFAR10_FILES),
    )
    arrays = load_dataset("cifar10", tmp_path)
    check_arrays(arrays, 30, 8, (3, 32, 32))
    np.testing.assert_array_equal(arrays.train_x, written["train_x"])
    np.testing.assert_array_equal(arrays.train_y, written["train_y"])
    assert arrays.info["verified"]
    assert arrays.meta.mean[0] == pytest.approx(0.4914, abs=1e-4)
    assert load_dataset("cifar10", tmp_path, normalization="imagenet").meta.mean == (0.485, 0.456, 0.406)
    with pytest.raises(ConfigError, match="normalization"):
        load_dataset("cifar10", tmp_path, normalization="bogus")


def test_cifar10_missing_batch(tmp_path):
    fx.write_cifar10(tmp_path)
    (tmp_path / "cifar10" / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(DataError, match="data_batch_3"):
        load_dataset("cifar10", tmp_path, verify=False)


def test_cifar100_fine_and_coarse(tmp_path):
    written = fx.write_cifar100(tmp_path)
    arrays = load_dataset("cifar100", tmp_path, verify=False)
    check_arrays(arrays, 20, 10, (3, 32, 32))
    np.testing.assert_array_equal(arrays.train_y, written["train_y"])
    coarse = load_dataset("cifar100", tmp_path, verify=False, labels="coarse")
    assert coarse.meta.num_classes == 20
    np.testing.assert_array_equal(coarse.test_y, written["test_coarse"])


def test_cifar_garbage_file_is_a_data_error(tmp_path):
    fx.write_cifar100(tmp_path)
    (tmp_path / "cifar100" / "cifar-100-python" / "train").write_bytes(b"not a pickle")
    with pytest.raises(DataError, match="cannot read CIFAR batch"):
        load_dataset("cifar100", tmp_path, verify=False)
