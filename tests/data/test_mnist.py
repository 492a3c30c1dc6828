"""Loaders of the image benchmarks read tiny files written in the official formats."""

from __future__ import annotations

import dataclasses
import gzip

import numpy as np
import pytest

import data_fixtures as fx
from fedbench.data import cifar, dataset_meta, load_dataset, medmnist, mnist, svhn
from fedbench.data.files import STAMP_NAME, file_digest
from fedbench.errors import ConfigError, DataError


def check_arrays(arrays, n_train, n_test, shape):
    assert arrays.train_x.dtype == np.uint8 and arrays.test_x.dtype == np.uint8
    assert arrays.train_y.dtype == np.int64 and arrays.test_y.dtype == np.int64
    assert arrays.train_x.shape == (n_train, *shape)
    assert arrays.test_x.shape == (n_test, *shape)
    assert arrays.train_y.shape == (n_train,) and arrays.test_y.shape == (n_test,)
    assert arrays.meta.input_shape == shape
    assert arrays.train_y.min() >= 0 and arrays.train_y.max() < arrays.meta.num_classes


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


# ---- CIFAR ----------------------------------------------------------------------------------------------


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


# ---- SVHN -----------------------------------------------------------------------------------------------


def test_svhn_mat(tmp_path, monkeypatch):
    written = fx.write_svhn(tmp_path)
    root = tmp_path / "svhn"
    patched = {
        k: dataclasses.replace(f, md5=file_digest(root / f.path)) if (root / f.path).exists() else f
        for k, f in svhn.SVHN_FILES.items()
    }
    monkeypatch.setattr(svhn, "SVHN_FILES", patched)
    arrays = load_dataset("svhn", tmp_path)
    check_arrays(arrays, 15, 7, (3, 32, 32))
    np.testing.assert_array_equal(arrays.train_x, written["train_x"])
    np.testing.assert_array_equal(arrays.train_y, written["train_y"])
    assert arrays.train_y.max() <= 9
    assert arrays.info["verified"]
    with pytest.raises(DataError, match="extra_32x32.mat"):
        load_dataset("svhn", tmp_path, extra=True)


# ---- MedMNIST -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["organamnist", "organcmnist", "organsmnist"])
def test_medmnist_npz(tmp_path, monkeypatch, flag):
    written = fx.write_medmnist(tmp_path, flag)
    md5s, v2, counts, stats = medmnist._MEDMNIST[flag]
    digest = file_digest(tmp_path / flag / f"{flag}.npz")
    monkeypatch.setitem(medmnist._MEDMNIST, flag, ({**md5s, 28: digest}, v2, counts, stats))
    arrays = load_dataset(flag, tmp_path)
    check_arrays(arrays, 22, 9, (1, 28, 28))
    assert arrays.meta.num_classes == 11
    np.testing.assert_array_equal(arrays.train_y, written["train_labels"].reshape(-1))
    assert arrays.info["verified"] and arrays.info["version"] == "v3"
    pooled = load_dataset(flag, tmp_path, pool="train+val")
    assert len(pooled.train_y) == 27
    everything = load_dataset(flag, tmp_path, pool="all")
    assert len(everything.train_y) == 36 and len(everything.test_y) == 0
    assert dataset_meta(flag).used_by == ("fedtr",)


def test_medmnist_v2_file_is_accepted(tmp_path, monkeypatch):
    fx.write_medmnist(tmp_path, "organsmnist")
    md5s, _, counts, stats = medmnist._MEDMNIST["organsmnist"]
    digest = file_digest(tmp_path / "organsmnist" / "organsmnist.npz")
    monkeypatch.setitem(medmnist._MEDMNIST, "organsmnist", (md5s, digest, counts, stats))
    arrays = load_dataset("organsmnist", tmp_path)
    assert arrays.info["verified"] and arrays.info["version"] == "v2"


def test_medmnist_other_size_and_bad_params(tmp_path):
    fx.write_medmnist(tmp_path, "organcmnist", size=64)
    arrays = load_dataset("organcmnist", tmp_path, size=64, verify=False)
    check_arrays(arrays, 22, 9, (1, 64, 64))
    with pytest.raises(DataError, match="organcmnist.npz"):
        load_dataset("organcmnist", tmp_path)
    with pytest.raises(ConfigError, match="size"):
        load_dataset("organcmnist", tmp_path, size=30)
    with pytest.raises(ConfigError, match="no parameter"):
        load_dataset("organcmnist", tmp_path, bogus=1)
