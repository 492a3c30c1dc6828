"""Synthetic stand-ins: generated data with a dataset's shapes, classes and natural groups.

Each class gets a fixed random template; a sample is its class template plus noise, so a model can
learn something (learning is visible in smoke runs) without any real data. Used by ``--synthetic``;
the registry records ``synthetic=true`` and reports never mix such runs with real-data runs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from fedbench.data._registry import DATASETS, dataset_meta
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import pool_train_test, read_train_test


def synthetic_like(
    meta: DatasetMeta,
    seed: int = 0,
    train_size: int = 2000,
    test_size: int = 500,
    num_groups: int | None = None,
    signal: float = 0.35,
) -> DatasetArrays:
    rng = np.random.default_rng(seed)
    shape = tuple(meta.input_shape)
    templates = rng.random((meta.num_classes, *shape))

    segmentation = meta.task == "segmentation"
    signals = len(meta.mean) == 0  # float signal datasets (PAMAP2) carry no image normalisation

    def draw(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        y = rng.integers(0, meta.num_classes, n)
        noise = rng.random((n, *shape), dtype=np.float32)
        x = np.clip(signal * templates[y] + (1 - signal) * noise, 0, 1)
        groups = rng.integers(0, num_groups, n) if num_groups else None
        if segmentation:
            # masks (N, num_classes, H, W): a class-template threshold, so masks correlate with the images
            masks = (templates[y][:, :1] > 0.5).repeat(meta.num_classes, axis=1).astype(np.uint8)
            return (x * 255).astype(np.uint8), masks, groups
        if signals:
            return x.astype(np.float32), y.astype(np.int64), groups
        return (x * 255).astype(np.uint8), y.astype(np.int64), groups

    return read_train_test(meta, draw, train_size, test_size, {"synthetic": True, "verified": False})


def default_test_size(train_size: int, num_groups: int | None) -> int:
    return max(2 * (num_groups or 1), min(500, train_size // 4))


def synthetic_sizes(input_shape: tuple[int, ...], num_groups: int | None = None) -> tuple[int, int]:
    """(train, test) sizes of a stand-in by default: at most ~50M values per split (a 256×256 RGB stand-in then has
    ~250 training images), at least 10 training and 2 test samples per natural group. The cost planner reads it."""
    per_sample = int(np.prod(input_shape))
    train_size = max(10 * (num_groups or 1), min(2000, 50_000_000 // per_sample))
    return train_size, default_test_size(train_size, num_groups)


def synthetic_dataset(
    name: str,
    seed: int = 0,
    train_size: int | None = None,
    test_size: int | None = None,
    image_size: int | None = None,
    params: dict[str, Any] | None = None,
) -> DatasetArrays:
    """Stand-in for a registered dataset: its shapes, classes and its natural group count (one group per
    client of the paper's set-up: domains, hospitals, subjects, writers). ``image_size`` (the loader's
    parameter, e.g. from a recipe's ``dataset_params``) makes the images image_size × image_size, as the loader would.
    Of the loader's other ``params`` the stand-in follows those that shape the data as the loader would: the list
    of groups to load (the parameter registered as ``groups_param``, e.g. retinal's ``sites``) sets the group
    count, and ``pool_splits = true`` pools train and test into the training pool."""
    params = params or {}
    image_size = params.get("image_size", image_size)
    meta = dataset_meta(name)
    if image_size is not None and len(meta.input_shape) == 3:
        meta = replace(meta, input_shape=(meta.input_shape[0], int(image_size), int(image_size)))
    registered = DATASETS.info(name)
    num_groups = registered.get("num_groups")
    if params.get(registered.get("groups_param", "")) is not None:
        num_groups = len(params[registered["groups_param"]])
    default_train, default_test = synthetic_sizes(meta.input_shape, num_groups)
    train_size = train_size or default_train
    test_size = test_size or (
        default_test if train_size == default_train else default_test_size(train_size, num_groups)
    )
    arrays = synthetic_like(meta, seed=seed, train_size=train_size, test_size=test_size, num_groups=num_groups)
    if num_groups:
        # every group present in train and test, so the natural partition has exactly num_groups clients
        arrays.train_groups = np.arange(train_size) % num_groups
        arrays.test_groups = np.arange(test_size) % num_groups
    arrays.info["dataset"] = name
    return pool_train_test(arrays) if params.get("pool_splits") is True else arrays
