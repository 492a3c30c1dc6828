"""FEMNIST (fedbench/data/femnist.py) from tiny files in its official formats, LEAF json and TFF h5, and its pixel
polarity: both formats store background 1.0 / ink 0.0, and fedbench keeps it."""

from __future__ import annotations

import numpy as np
import pytest

import data_fixtures as fx
from data_fixtures import natural_clients
from fedbench.data import load_dataset
from fedbench.errors import DataError


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


def glyph() -> np.ndarray:
    """A 28×28 'character' as both formats store it: background 1.0, ink 0.0, one anti-aliased edge at 0.5."""
    image = np.ones((28, 28), np.float32)
    image[6:22, 12:15] = 0.0  # vertical stroke
    image[6:22, 15] = 0.5  # anti-aliased edge
    return image


def write_leaf(root, image: np.ndarray, writer: str = "f0000_00") -> None:
    for split in ("train", "test"):
        blob = {
            "users": [writer],
            "num_samples": [2],
            "user_data": {writer: {"x": [image.ravel().tolist(), np.ones(784).tolist()], "y": [1, 10]}},
        }
        fx.write_json(root / "femnist" / "data" / split / f"all_data_0_niid_0_keep_0_{split}_9.json", blob)


def write_tff(root, image: np.ndarray, writer: str = "f0000_00") -> None:
    h5py = pytest.importorskip("h5py")
    (root / "femnist").mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        with h5py.File(root / "femnist" / f"fed_emnist_{split}.h5", "w") as handle:
            group = handle.create_group(f"examples/{writer}")
            group["pixels"] = np.stack([image, np.ones((28, 28), np.float32)])  # float32 (N, 28, 28) in [0, 1]
            group["label"] = np.array([1, 10], np.int32)


def test_femnist_polarity_kept_and_equal_across_formats(tmp_path):
    image = glyph()
    write_leaf(tmp_path / "leaf", image)
    write_tff(tmp_path / "tff", image)
    leaf = load_dataset("femnist", tmp_path / "leaf", use_prepared=False)
    tff = load_dataset("femnist", tmp_path / "tff", use_prepared=False)
    assert leaf.info["format"] == "leaf" and tff.info["format"] == "tff"
    np.testing.assert_array_equal(leaf.train_x, tff.train_x)
    np.testing.assert_array_equal(leaf.test_x, tff.test_x)
    x = leaf.train_x[0, 0]
    assert x[0, 0] == 255 and x[10, 13] == 0 and x[10, 15] == 128  # background high, ink low: not inverted
    assert x.mean() > 200  # mostly background (FL-bench mean 0.9637)
    assert (leaf.train_x[1] == 255).all()  # a blank page stays white
