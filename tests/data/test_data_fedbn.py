"""The FedBN benchmarks (fedbench/data/fedbn.py) from tiny files in their official layouts: Digits-5, Office-Caltech-10
and DomainNet."""

from __future__ import annotations

import numpy as np
import pytest

import data_fixtures as fx
from data_fixtures import natural_clients
from fedbench.data import load_dataset
from fedbench.data.fedbn import DOMAINNET_CLASSES, DOMAINNET_DOMAINS, OFFICE_CLASSES, OFFICE_DOMAINS
from fedbench.errors import DataError


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
