"""Loaders of the naturally grouped / medical datasets read tiny files in their real formats."""

from __future__ import annotations

import numpy as np
import pytest

import data_fixtures as fx
from fedbench.data import load_dataset
from fedbench.data.fedbn import DOMAINNET_CLASSES, DOMAINNET_DOMAINS, OFFICE_CLASSES, OFFICE_DOMAINS
from fedbench.data.partition import make_partition
from fedbench.errors import ConfigError, DataError


def natural_clients(arrays):
    groups = np.unique(arrays.train_groups)
    parts = make_partition("natural", arrays.train_y, arrays.train_groups, len(groups), np.random.default_rng(0), {})
    for group, part in zip(groups, parts):
        assert np.all(arrays.train_groups[part] == group)
    return parts


# ---- FEMNIST -----------------------------------------------------------------------------------------------


def test_femnist_leaf_json(tmp_path):
    written = fx.write_femnist_leaf(tmp_path)
    arrays = load_dataset("femnist", tmp_path)
    assert arrays.train_x.shape == (12, 1, 28, 28) and arrays.train_x.dtype == np.uint8
    assert arrays.test_x.shape == (6, 1, 28, 28)
    assert arrays.train_y.dtype == np.int64 and arrays.train_y.max() < 62
    assert sorted(np.unique(arrays.train_groups)) == [0, 1, 2]
    assert arrays.info["group_names"] == written["users"]
    assert set(np.unique(arrays.test_groups)) == set(np.unique(arrays.train_groups))
    assert arrays.info["verified"] is False  # LEAF output has no published checksum
    assert len(natural_clients(arrays)) == 3


def test_femnist_tff_h5(tmp_path):
    pytest.importorskip("h5py")
    fx.write_femnist_h5(tmp_path)
    arrays = load_dataset("femnist", tmp_path)
    assert arrays.info["format"] == "tff"
    assert arrays.train_x.shape == (12, 1, 28, 28) and len(np.unique(arrays.train_groups)) == 3


def test_femnist_missing(tmp_path):
    with pytest.raises(DataError, match="fed_emnist_train.h5"):
        load_dataset("femnist", tmp_path)
    with pytest.raises(DataError, match="data/train"):
        load_dataset("femnist", tmp_path, format="leaf")


# ---- PAMAP2 ------------------------------------------------------------------------------------------------


def test_pamap2_fedap_preset(tmp_path):
    fx.write_pamap2(tmp_path)
    arrays = load_dataset("pamap2", tmp_path, subjects=[101, 102, 103])
    assert arrays.train_x.dtype == np.float32 and arrays.train_x.shape[1:] == (27, 1, 200)
    assert arrays.meta.input_shape == (27, 1, 200) and arrays.meta.num_classes == 10
    assert not np.isnan(arrays.train_x).any(), "NaN gaps are interpolated"
    # activities 1, 4 and 17 are in the FedAP set; 5 (running) and 24 (rope jumping) are dropped, 0 is transient
    classes = set(np.unique(np.concatenate([arrays.train_y, arrays.test_y])).tolist())
    assert classes == {0, 3, 9}
    total = len(arrays.train_y) + len(arrays.test_y)
    assert abs(len(arrays.test_y) - 0.2 * total) <= 3 * 3  # stratified per subject × class
    assert set(np.unique(arrays.train_groups)) == {0, 1, 2}
    assert arrays.info["group_names"] == ["subject101", "subject102", "subject103"]
    natural_clients(arrays)


def test_pamap2_pfllib_preset_and_overrides(tmp_path):
    fx.write_pamap2(tmp_path, subjects=(101,))
    arrays = load_dataset("pamap2", tmp_path, preset="pfllib", subjects=[101], test_fraction=0.0)
    assert arrays.meta.num_classes == 12 and arrays.train_x.shape[1:] == (27, 1, 256)
    assert np.abs(arrays.train_x).max() <= 1.0 + 1e-6, "per-subject max-abs scaling"
    assert 4 in arrays.train_y.tolist() and 11 in arrays.train_y.tolist()  # running and rope jumping kept
    custom = load_dataset(
        "pamap2", tmp_path, subjects=[101], window=50, stride=50, activities=[1, 4], test_fraction=0.0
    )
    assert custom.meta.num_classes == 2 and custom.train_x.shape[-1] == 50
    with pytest.raises(ConfigError, match="preset"):
        load_dataset("pamap2", tmp_path, preset="bogus")
    with pytest.raises(DataError, match="subject102.dat"):
        load_dataset("pamap2", tmp_path)


def test_pamap2_window_labels():
    from fedbench.data.pamap2 import windows

    signals = np.arange(20, dtype=np.float32)[:, None].repeat(2, 1)
    activity = np.array([0] * 4 + [1] * 6 + [4] * 10)
    x, y = windows(signals, activity, 5, 5, "majority", (1, 4))
    assert x.shape == (3, 2, 1, 5) and y.tolist() == [0, 1, 1]  # the first window is mostly transient (0): dropped
    _, y_min = windows(signals, activity, 5, 5, "min", (1, 4))
    assert y_min.tolist() == [0, 1, 1]  # PFLlib: smallest id in the window, so a transient sample drops it


# ---- Camelyon17 --------------------------------------------------------------------------------------------


def test_camelyon17_by_hospital(tmp_path):
    fx.write_camelyon17(tmp_path)
    arrays = load_dataset("camelyon17", tmp_path)
    assert arrays.train_x.shape[1:] == (3, 96, 96) and arrays.train_x.dtype == np.uint8
    assert len(arrays.train_y) + len(arrays.test_y) == 30
    assert set(np.unique(arrays.train_groups)) == set(range(5)) == set(np.unique(arrays.test_groups))
    assert set(np.unique(arrays.train_y)) == {0, 1}
    assert len(natural_clients(arrays)) == 5
    capped = load_dataset("camelyon17", tmp_path, max_per_client=2, test_fraction=0.5)
    assert len(capped.train_y) + len(capped.test_y) == 10
    official = load_dataset("camelyon17", tmp_path, split="official")
    assert set(np.unique(official.test_groups)) == {2}
    assert set(np.unique(official.train_groups)) == {0, 3, 4}


def test_camelyon17_missing_patch(tmp_path):
    fx.write_camelyon17(tmp_path)
    next((tmp_path / "camelyon17" / "camelyon17_v1.0" / "patches").rglob("*.png")).unlink()
    with pytest.raises(DataError, match="missing image"):
        load_dataset("camelyon17", tmp_path)
    with pytest.raises(DataError, match="metadata.csv"):
        load_dataset("camelyon17", tmp_path / "elsewhere")


# ---- FedBN packages ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("stratified_names", [False, True])
def test_digits5(tmp_path, stratified_names):
    fx.write_digits5(tmp_path, stratified_names=stratified_names)
    arrays = load_dataset("digits5", tmp_path)
    assert arrays.train_x.shape == (40, 3, 28, 28) and arrays.test_x.shape == (20, 3, 28, 28)
    assert arrays.info["group_names"] == ["MNIST", "SVHN", "USPS", "SynthDigits", "MNIST_M"]
    assert np.bincount(arrays.train_groups).tolist() == [8] * 5
    # gray domains are repeated over three channels
    mnist = arrays.train_x[arrays.train_groups == 0]
    assert np.array_equal(mnist[:, 0], mnist[:, 2])
    assert len(natural_clients(arrays)) == 5


def test_digits5_fedbn_partition_and_missing(tmp_path):
    fx.write_digits5(tmp_path)
    part = load_dataset("digits5", tmp_path, train_file="part0", normalization="fedbn")
    assert len(part.train_y) == 15 and part.meta.mean == (0.5, 0.5, 0.5)
    (tmp_path / "digits5" / "USPS" / "test.pkl").unlink()
    with pytest.raises(DataError, match="USPS/test.pkl"):
        load_dataset("digits5", tmp_path)


def test_office_caltech10(tmp_path):
    fx.write_path_based(tmp_path, "office_caltech10", "office_caltech_10", OFFICE_DOMAINS, OFFICE_CLASSES)
    arrays = load_dataset("office_caltech10", tmp_path, image_size=32)
    assert arrays.train_x.shape == (12, 3, 32, 32) and arrays.test_x.shape == (12, 3, 32, 32)
    assert arrays.meta.mean == (0.485, 0.456, 0.406)
    assert arrays.info["group_names"] == list(OFFICE_DOMAINS)
    assert arrays.train_y.tolist()[:3] == [OFFICE_CLASSES.index(c) for c in OFFICE_CLASSES[5:8]]
    assert len(natural_clients(arrays)) == 4


def test_domainnet_with_mismatched_pickle_paths(tmp_path):
    # FedBN issue #10: pickled paths do not match the folder layout; the loader retries <domain>/<class>/<file>.
    fx.write_path_based(
        tmp_path,
        "domainnet",
        "DomainNet",
        DOMAINNET_DOMAINS,
        DOMAINNET_CLASSES,
        per_split=2,
        path_prefix="old/location/DomainNet",
    )
    arrays = load_dataset("domainnet", tmp_path, image_size=24, max_per_client=1)
    assert arrays.train_x.shape == (6, 3, 24, 24) and arrays.test_x.shape == (12, 3, 24, 24)
    assert len(natural_clients(arrays)) == 6
    with pytest.raises(DataError, match="painting_train.pkl"):
        (tmp_path / "domainnet" / "DomainNet" / "painting_train.pkl").unlink()
        load_dataset("domainnet", tmp_path)


# ---- Retinal fundus ------------------------------------------------------------------------------------------


def test_retinal_segmentation(tmp_path):
    fx.write_retinal(tmp_path)
    arrays = load_dataset("retinal", tmp_path, image_size=40)
    assert arrays.meta.task == "segmentation"
    assert arrays.train_x.shape == (4, 3, 40, 40) and arrays.train_y.shape == (4, 2, 40, 40)
    disc, cup = arrays.train_y[0]
    assert disc.sum() == 400 and cup.sum() == 100  # disc = rim + cup (20×20), cup 10×10
    assert arrays.info["group_names"] == ["Domain1", "Domain2"]
    only_two = load_dataset("retinal", tmp_path, sites=["Domain2"], image_size=20)
    assert len(only_two.train_x) == 2 and only_two.train_y.shape[-1] == 20
    with pytest.raises(DataError, match="Domain7"):
        load_dataset("retinal", tmp_path, sites=["Domain7"])


# ---- COVID ---------------------------------------------------------------------------------------------------


def test_covid19_mendeley_folders(tmp_path):
    fx.write_covid19_folders(tmp_path)
    arrays = load_dataset("covid19", tmp_path, image_size=32)
    assert arrays.train_x.shape[1:] == (3, 32, 32)
    assert len(arrays.train_y) == 16 and len(arrays.test_y) == 4
    assert np.bincount(arrays.test_y).tolist() == [1, 1, 1, 1]
    assert arrays.meta.num_classes == 4


def test_covid19_fedap_npy(tmp_path):
    root = tmp_path / "covid19"
    root.mkdir()
    np.save(root / "xdata.npy", np.random.default_rng(0).integers(0, 256, (10, 24, 20, 3), dtype=np.uint8))
    np.save(root / "ydata.npy", np.arange(10) % 4)
    arrays = load_dataset("covid19", tmp_path, image_size=16, test_fraction=0.0)
    assert arrays.train_x.shape == (10, 3, 16, 16) and arrays.info["format"] == "fedap-npy"


def test_covidx(tmp_path):
    fx.write_covidx(tmp_path)
    arrays = load_dataset("covidx", tmp_path, image_size=32)
    assert arrays.train_x.shape == (6, 3, 32, 32) and arrays.test_x.shape == (4, 3, 32, 32)
    assert arrays.train_y.tolist() == [0, 1, 0, 1, 0, 1]
    assert arrays.meta.num_classes == 2
    (tmp_path / "covidx" / "test" / "test_1.png").unlink()
    with pytest.raises(DataError, match="test_1.png"):
        load_dataset("covidx", tmp_path)
