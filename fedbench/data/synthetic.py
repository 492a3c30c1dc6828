"""Synthetic stand-ins: generated data with a dataset's shapes, classes and natural groups.

Each class gets a fixed random template; a sample is its class template plus noise, so a model can
learn something (learning is visible in smoke runs) without any real data. Used by ``--synthetic``;
the registry records ``synthetic=true`` and reports never mix such runs with real-data runs.
"""

from __future__ import annotations

import numpy as np

from fedbench.data.base import DatasetArrays, DatasetMeta


def synthetic_like(
    meta: DatasetMeta, seed: int = 0, train_size: int = 2000, test_size: int = 500, num_groups: int | None = None,
    signal: float = 0.35,
) -> DatasetArrays:
    rng = np.random.default_rng(seed)
    shape = tuple(meta.input_shape)
    templates = rng.random((meta.num_classes, *shape))

    def draw(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        y = rng.integers(0, meta.num_classes, n)
        noise = rng.random((n, *shape))
        x = np.clip(signal * templates[y] + (1 - signal) * noise, 0, 1)
        groups = rng.integers(0, num_groups, n) if num_groups else None
        return (x * 255).astype(np.uint8), y.astype(np.int64), groups

    train_x, train_y, train_g = draw(train_size)
    test_x, test_y, test_g = draw(test_size)
    return DatasetArrays(
        meta=meta, train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y,
        train_groups=train_g, test_groups=test_g, info={"synthetic": True, "verified": False},
    )
