"""What a dataset loader returns: arrays plus metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class DatasetMeta:
    """Static facts about a dataset (independent of whether its files are present)."""

    name: str
    num_classes: int
    input_shape: tuple[int, ...]  # (C, H, W) for images, (C, 1, T) for signals
    mean: tuple[float, ...]  # per-channel normalisation applied after scaling to [0, 1]
    std: tuple[float, ...]
    used_by: tuple[str, ...] = ()
    group_kind: str | None = None  # e.g. "subject", "hospital", "domain", "writer"
    task: str = "classification"  # or "segmentation"


@dataclass
class DatasetArrays:
    """Train/test arrays. Images are uint8 (N, C, H, W) scaled by /255 at load; signals are float32.

    ``train_groups``/``test_groups`` hold natural group ids (subject, hospital, domain, writer) where
    the data has them; the ``natural`` partitioner maps one group to one client.
    """

    meta: DatasetMeta
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    train_groups: np.ndarray | None = None
    test_groups: np.ndarray | None = None
    info: dict[str, Any] = field(default_factory=dict)  # provenance: files, versions, verified flag
