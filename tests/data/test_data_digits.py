"""scikit-learn's 8×8 digits (``fedbench/data/digits.py``), the quickstart's data: every image once, rescaled to the
uint8 range, a stratified held-out split fixed by its split seed."""

from __future__ import annotations

import numpy as np

from fedbench.data.digits import META, load_digits


def test_every_image_once_rescaled_to_uint8_with_a_stratified_split(tmp_path):
    from sklearn.datasets import load_digits as sklearn_digits

    arrays = load_digits(tmp_path)
    assert (len(arrays.train_y), len(arrays.test_y)) == (1437, 360)  # the registered counts
    assert arrays.train_x.dtype == np.uint8 and arrays.train_x.shape[1:] == META.input_shape == (1, 8, 8)
    assert arrays.train_x.max() == 255 and arrays.train_x.min() == 0  # 0..16 → 0..255
    bunch = sklearn_digits()
    images = np.concatenate([arrays.train_x, arrays.test_x])[:, 0].reshape(len(bunch.images), -1)
    expected = np.round(bunch.images * (255 / 16)).astype(np.uint8).reshape(len(bunch.images), -1)
    assert sorted(map(bytes, images)) == sorted(map(bytes, expected))  # each image exactly once
    test_share = np.bincount(arrays.test_y, minlength=10) / np.bincount(bunch.target, minlength=10)
    assert np.allclose(test_share, 0.2, atol=0.02)  # stratified: every class 20 % in the test split
    assert arrays.info == {"source": "sklearn.datasets.load_digits", "verified": True}


def test_the_split_depends_on_the_split_seed_and_the_fraction_only(tmp_path):
    first, again = load_digits(tmp_path), load_digits(tmp_path / "elsewhere")
    assert np.array_equal(first.test_x, again.test_x) and np.array_equal(first.test_y, again.test_y)
    other = load_digits(tmp_path, split_seed=1)
    assert not np.array_equal(first.test_x, other.test_x)
    assert len(load_digits(tmp_path, test_fraction=0.5).test_y) == 899
