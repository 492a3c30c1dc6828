"""Camelyon17 (fedbench/data/camelyon17.py) from tiny files in its official layout: patches by hospital, and a missing
patch named."""

from __future__ import annotations

import numpy as np
import pytest

import data_fixtures as fx
from data_fixtures import natural_clients
from fedbench.data import load_dataset
from fedbench.errors import DataError


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
