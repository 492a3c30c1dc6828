"""The helpers of loaders whose data has no official train/test split: a stratified hold-out inside every group, a
per-group cap, the pool split into arrays, arrays read split by split, the normalisation choice and the pooling of
train and test files."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import (
    HALF3,
    IMAGENET,
    cap_per_group,
    from_pool,
    holdout_split,
    pool_train_test,
    read_train_test,
    with_normalization,
)
from fedbench.errors import ConfigError

META = DatasetMeta("toy", 2, (1, 1, 2), (0.0,), (1.0,))


def test_holdout_split_is_stratified_inside_every_group_and_fixed_by_its_seed():
    y = np.tile([0, 0, 0, 0, 0, 1, 1, 1, 1, 1], 2)
    groups = np.repeat([0, 1], 10)
    train, test = holdout_split(y, 0.4, split_seed=5, groups=groups)
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(20))
    pairs = list(zip(groups[test].tolist(), y[test].tolist()))
    assert {pair: pairs.count(pair) for pair in pairs} == {(0, 0): 2, (0, 1): 2, (1, 0): 2, (1, 1): 2}
    again = holdout_split(y, 0.4, split_seed=5, groups=groups)
    assert all(np.array_equal(a, b) for a, b in zip((train, test), again))
    other = holdout_split(y, 0.4, split_seed=6, groups=groups)
    assert not np.array_equal(test, other[1])  # the seed picks which samples are held out
    assert list(train) == sorted(train) and list(test) == sorted(test)


def test_holdout_split_without_groups_and_of_nothing():
    train, test = holdout_split(np.array([0, 1, 0, 1]), 0.5, 0)
    assert sorted(np.array([0, 1, 0, 1])[test].tolist()) == [0, 1]
    empty = holdout_split(np.array([], dtype=np.int64), 0.5, 0)
    assert [len(part) for part in empty] == [0, 0]


@pytest.mark.parametrize("fraction", [-0.1, 1.0])
def test_holdout_split_rejects_a_fraction_outside_zero_to_one(fraction):
    with pytest.raises(ConfigError, match=f"test_fraction={fraction}"):
        holdout_split(np.array([0, 1]), fraction, 0)


def test_cap_per_group_keeps_at_most_cap_of_every_group():
    groups = np.repeat([0, 1, 2], [5, 2, 4])
    kept = cap_per_group(np.zeros(11), groups, 3, seed=1)
    assert np.bincount(groups[kept]).tolist() == [3, 2, 3]
    assert cap_per_group(np.zeros(11), groups, None, seed=1).tolist() == list(range(11))
    with pytest.raises(ConfigError, match="max_per_client=0"):
        cap_per_group(np.zeros(11), groups, 0, seed=1)


def test_from_pool_splits_inputs_labels_and_groups_alike_and_records_how():
    y = np.array([0, 1] * 5)
    x = np.arange(10, dtype=np.float32).reshape(10, 1, 1, 1).repeat(2, axis=3)
    groups = np.repeat([0, 1], 5)
    arrays = from_pool(META, x, y, groups, 0.2, 3, {"source": "here"}, group_names=["a", "b"])
    train, test = holdout_split(y, 0.2, 3, groups)
    assert np.array_equal(arrays.train_x[:, 0, 0, 0], train) and np.array_equal(arrays.test_x[:, 0, 0, 0], test)
    assert np.array_equal(arrays.train_y, y[train]) and np.array_equal(arrays.test_groups, groups[test])
    assert arrays.info == {"source": "here", "test_fraction": 0.2, "split_seed": 3, "group_names": ["a", "b"]}
    ungrouped = from_pool(META, x, y, None, 0.2, 3, {})
    assert ungrouped.train_groups is None and ungrouped.test_groups is None


def test_read_train_test_reads_the_training_split_first_and_keeps_each_splits_parts():
    calls = []

    def read(split: str):
        calls.append(split)  # a seeded generator (the synthetic stand-ins) draws the training split first
        n = 3 if split == "train" else 2
        return np.full((n, 1, 1, 2), len(calls)), np.arange(n), np.full(n, 7 if split == "train" else 8)

    arrays = read_train_test(META, read, "train", "test", {"files": 1})
    assert calls == ["train", "test"]
    assert arrays.train_x.shape == (3, 1, 1, 2) and (arrays.train_x == 1).all() and (arrays.test_x == 2).all()
    assert arrays.train_y.tolist() == [0, 1, 2] and arrays.test_y.tolist() == [0, 1]
    assert arrays.train_groups.tolist() == [7, 7, 7] and arrays.test_groups.tolist() == [8, 8]
    assert arrays.meta == META and arrays.info == {"files": 1}


def test_with_normalization_names_the_choices_of_a_wrong_one():
    table = {"imagenet": IMAGENET, "half": HALF3}
    assert with_normalization(META, table, "half").mean == HALF3[0]
    with pytest.raises(ConfigError, match="normalization='none' for toy; choose one of imagenet, half"):
        with_normalization(META, table, "none")


def test_pool_train_test_moves_the_test_files_into_the_training_pool():
    arrays = DatasetArrays(
        META,
        np.zeros((3, 1, 1, 2)),
        np.array([0, 1, 0]),
        np.ones((2, 1, 1, 2)),
        np.array([1, 1]),
        train_groups=np.array([0, 0, 1]),
        test_groups=np.array([1, 0]),
        info={"files": 2},
    )
    pooled = pool_train_test(arrays)
    assert pooled.train_y.tolist() == [0, 1, 0, 1, 1] and pooled.train_groups.tolist() == [0, 0, 1, 1, 0]
    assert len(pooled.test_x) == len(pooled.test_y) == len(pooled.test_groups) == 0
    assert pooled.info == {"files": 2, "pooled_splits": True}
