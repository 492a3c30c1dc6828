"""Synthetic stand-ins (fedbench/data/synthetic.py) match the data set they stand in for."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.data import DATASETS, dataset_meta
from fedbench.data.synthetic import synthetic_dataset


@pytest.mark.parametrize("name", DATASETS.names())
def test_synthetic_stand_in_matches_the_dataset(name):
    meta = dataset_meta(name)
    num_groups = DATASETS.info(name).get("num_groups")
    size = max(24, 2 * (num_groups or 0))
    arrays = synthetic_dataset(name, seed=1, train_size=size, test_size=size // 2)
    assert arrays.train_x.shape == (size, *meta.input_shape)
    assert arrays.info["synthetic"] is True and arrays.info["verified"] is False
    if meta.task == "segmentation":
        assert arrays.train_y.shape == (size, meta.num_classes, *meta.input_shape[1:])
    else:
        assert arrays.train_y.max() < meta.num_classes and arrays.train_y.dtype == np.int64
    if num_groups:
        assert len(np.unique(arrays.train_groups)) == num_groups == len(np.unique(arrays.test_groups))
    assert meta.group_kind is None or num_groups, "grouped datasets declare their group count"
