"""The MNIST family (fedbench/data/mnist.py: MNIST, Fashion-MNIST, EMNIST) read from tiny files written in the
official formats (idx, gzip, zip)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

import data_fixtures as fx
from data_fixtures import check_arrays
from fedbench.data import load_dataset, mnist
from fedbench.data.files import STAMP_NAME, file_digest
from fedbench.errors import DataError

# ---- MNIST / FMNIST / EMNIST ---------------------------------------------------------------------------


def test_mnist_reads_idx_gz(tmp_path, monkeypatch):
    written = fx.write_mnist_like(tmp_path)
    raw = tmp_path / "mnist" / "MNIST" / "raw"
    names = mnist._MNIST_NAMES
    monkeypatch.setattr(mnist, "MNIST_MD5", tuple(file_digest(raw / n) for n in names))
    arrays = load_dataset("mnist", tmp_path)
    check_arrays(arrays, 30, 12, (1, 28, 28))
    np.testing.assert_array_equal(arrays.train_x[:, 0], written["train_x"])
    np.testing.assert_array_equal(arrays.test_y, written["t10k_y"])
    assert arrays.info["verified"] is True
    assert (tmp_path / "mnist" / STAMP_NAME).is_file()
    assert arrays.meta.mean == (0.1307,) and arrays.meta.std == (0.3081,)


def test_mnist_checksum_mismatch_is_a_data_error(tmp_path):
    fx.write_mnist_like(tmp_path)
    with pytest.raises(DataError, match="corrupt or a different version"):
        load_dataset("mnist", tmp_path)


def test_mnist_no_verify_records_unverified(tmp_path):
    fx.write_mnist_like(tmp_path)
    arrays = load_dataset("mnist", tmp_path, verify=False)
    assert arrays.info["verified"] is False
    assert "skipped" in arrays.info["verification"]


def test_mnist_missing_files_name_the_paths(tmp_path):
    with pytest.raises(DataError) as error:
        load_dataset("mnist", tmp_path)
    message = str(error.value)
    assert str(tmp_path / "mnist" / "MNIST" / "raw" / "train-images-idx3-ubyte.gz") in message
    assert "fedbench datasets download mnist" in message
    assert "\n" not in message


def test_truncated_idx_is_a_data_error(tmp_path):
    fx.write_mnist_like(tmp_path)
    path = tmp_path / "mnist" / "MNIST" / "raw" / "train-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:-5]))
    with pytest.raises(DataError, match="truncated"):
        load_dataset("mnist", tmp_path, verify=False)


def test_real_mnist_bytes_parse_if_available():
    from pathlib import Path

    shared = Path("/work/shared/data/mnist-t10k/t10k-images-idx3-ubyte.gz")
    if not shared.is_file():
        pytest.skip("shared MNIST test files not present")
    images = mnist.read_idx(shared)
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8


def test_fmnist_presets(tmp_path):
    fx.write_mnist_like(tmp_path, "fmnist", "FashionMNIST/raw")
    arrays = load_dataset("fmnist", tmp_path, verify=False)
    check_arrays(arrays, 30, 12, (1, 28, 28))
    # FedImpro: Resize(32) + ToTensor, no normalisation.
    resized = load_dataset("fmnist", tmp_path, verify=False, image_size=32, normalize=False)
    check_arrays(resized, 30, 12, (1, 32, 32))
    assert resized.meta.mean == (0.0,) and resized.meta.std == (1.0,)


@pytest.mark.parametrize("as_zip", [True, False])
def test_emnist_balanced_from_zip_or_unpacked(tmp_path, monkeypatch, as_zip):
    written = fx.write_emnist(tmp_path, as_zip=as_zip)
    if as_zip:
        monkeypatch.setattr(mnist, "EMNIST_ZIP_MD5", file_digest(tmp_path / "emnist" / "gzip.zip"))
    arrays = load_dataset("emnist", tmp_path)
    check_arrays(arrays, 47, 20, (1, 28, 28))
    assert arrays.meta.num_classes == 47
    # EMNIST IDX images are stored transposed.
    np.testing.assert_array_equal(arrays.train_x[3, 0], written["train_x"][3].T)
    assert arrays.info["verified"] is as_zip
