"""PAMAP2 (fedbench/data/pamap2.py) from tiny files in its official format: the FedAP and PFLlib presets and the window
labels."""

from __future__ import annotations

import numpy as np
import pytest

import data_fixtures as fx
from data_fixtures import natural_clients
from fedbench.data import load_dataset
from fedbench.errors import ConfigError, DataError


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
