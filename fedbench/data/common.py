"""Helpers shared by loaders whose data has no official train/test split."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.errors import ConfigError


def holdout_split(
    labels: np.ndarray, test_fraction: float, split_seed: int, groups: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic stratified train/test split, done inside every group when groups are given (so each
    client keeps its own test part). The split seed is fixed per dataset, not the run seed, so every run
    of every method is evaluated on the same test samples."""
    if not 0 <= test_fraction < 1:
        raise ConfigError(f"dataset_params.test_fraction={test_fraction} must be in [0, 1)")
    rng = np.random.default_rng(split_seed)
    keys = labels if groups is None else groups.astype(np.int64) * (int(labels.max(initial=0)) + 1) + labels
    train, test = [], []
    for key in np.unique(keys):
        members = rng.permutation(np.flatnonzero(keys == key))
        cut = int(round(len(members) * test_fraction))
        test.append(members[:cut])
        train.append(members[cut:])
    if not train:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def cap_per_group(labels: np.ndarray, groups: np.ndarray, cap: int | None, seed: int) -> np.ndarray:
    """Indices keeping at most ``cap`` random samples of every group (laptop-scale runs)."""
    if cap is None:
        return np.arange(len(labels))
    if cap < 1:
        raise ConfigError(f"dataset_params.max_per_client={cap} must be ≥ 1")
    rng = np.random.default_rng(seed)
    kept = [rng.permutation(np.flatnonzero(groups == g))[:cap] for g in np.unique(groups)]
    return np.sort(np.concatenate(kept)) if kept else np.empty(0, np.int64)


def from_pool(
    meta: DatasetMeta,
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray | None,
    test_fraction: float,
    split_seed: int,
    info: dict,
    group_names: Sequence[str] | None = None,
) -> DatasetArrays:
    train, test = holdout_split(y, test_fraction, split_seed, groups)
    info = {**info, "test_fraction": test_fraction, "split_seed": split_seed}
    if group_names is not None:
        info["group_names"] = list(group_names)
    return split_arrays(meta, x, y, groups, train, test, info)


def split_arrays(
    meta: DatasetMeta,
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray | None,
    train: np.ndarray,
    test: np.ndarray,
    info: dict,
) -> DatasetArrays:
    """The arrays of a pool of samples, split by the ``train`` and ``test`` indices (groups too, where it has them)."""
    return DatasetArrays(
        meta,
        x[train],
        y[train],
        x[test],
        y[test],
        train_groups=None if groups is None else groups[train],
        test_groups=None if groups is None else groups[test],
        info=info,
    )


def read_train_test(
    meta: DatasetMeta,
    read: Callable[[Any], tuple[np.ndarray, np.ndarray, np.ndarray | None]],
    train: Any,
    test: Any,
    info: dict,
) -> DatasetArrays:
    """The arrays of a data set read one split at a time: ``read(train)`` and ``read(test)`` each give (inputs,
    labels, group ids or None)."""
    train_x, train_y, train_groups = read(train)
    test_x, test_y, test_groups = read(test)
    return DatasetArrays(
        meta, train_x, train_y, test_x, test_y, train_groups=train_groups, test_groups=test_groups, info=info
    )


def with_normalization(
    meta: DatasetMeta, table: Mapping[str, tuple[tuple[float, ...], tuple[float, ...]]], choice: str
) -> DatasetMeta:
    if choice not in table:
        raise ConfigError(f"dataset_params.normalization={choice!r} for {meta.name}; choose one of {', '.join(table)}")
    mean, std = table[choice]
    return replace(meta, mean=mean, std=std)


IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
NONE3 = ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
HALF3 = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))


def pool_train_test(arrays: DatasetArrays) -> DatasetArrays:
    """Train and test files as one training pool (groups kept), the test set left empty: for a paper that splits
    every client's data itself (LG-Mix's 0.6 / 0.2 / 0.2 per client, ``client_test = "split"``) rather than
    using the package's own split."""
    groups = None
    if arrays.train_groups is not None and arrays.test_groups is not None:
        groups = np.concatenate([arrays.train_groups, arrays.test_groups])
    return replace(
        arrays,
        train_x=np.concatenate([arrays.train_x, arrays.test_x]),
        train_y=np.concatenate([arrays.train_y, arrays.test_y]),
        test_x=arrays.test_x[:0],
        test_y=arrays.test_y[:0],
        train_groups=groups,
        test_groups=None if groups is None else groups[:0],
        info={**arrays.info, "pooled_splits": True},
    )
