"""PAMAP2 physical-activity monitoring: the raw UCI ``.dat`` files, windowed into IMU signals.

File format [UCI readme]: space-separated, 54 columns, NaN for missing values: timestamp, activityID,
heart rate, then three 17-column IMU blocks (hand, chest, ankle) of temperature, acc ±16g (3), acc ±6g
(3), gyroscope (3), magnetometer (3), orientation (4, invalid).

Presets [datasets.md §1.8]:
* ``fedap`` (FedTR default): 27 channels = acc ±16g + gyro + mag of the three IMUs, windows of 200
  samples (2 s at 100 Hz) with stride 100, label = majority activity, 10 classes. PersonalizedFL dropped
  labels {0, 5, 12} of its 13-label pre-processed space; reading that space as {transient} + the 12
  protocol activities in id order, the dropped ones are transient, running (5) and rope jumping (24),
  leaving {1,2,3,4,6,7,12,13,16,17} [inference — the pre-processed label space is undocumented]. The other
  reading, labels kept as raw activity ids (as the same author's ``microsoft/robustlearn``
  ``ddlearn/data_preprocess/deal_pamap.py`` keeps them), drops transient, running and ascending stairs:
  ``dataset_params = { activities = [1, 2, 3, 4, 6, 7, 13, 16, 17, 24] }``. The 27 channels are those
  of that script [code].
* ``pfllib``: windows of 256 with stride 128, window label = smallest activity id present (PFLlib's
  quirk), 12 classes, per-subject max-abs scaling.
Signals are float32 (N, 27, 1, T); groups = subject (101…109 → 0…8).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import from_pool
from fedbench.data.files import Download, FileSpec, Source, verify_files
from fedbench.errors import ConfigError, DataError

PROTOCOL_SUBJECTS = tuple(range(101, 110))
OPTIONAL_SUBJECTS = (101, 105, 106, 108, 109)
# 0-indexed columns of acc ±16g, gyroscope and magnetometer of the hand, chest and ankle IMUs (PFLlib's slices).
IMU_COLUMNS = tuple(c for start in (3, 20, 37) for c in (*range(start + 1, start + 4), *range(start + 7, start + 13)))
PRESETS = {
    "fedap": {
        "window": 200,
        "stride": 100,
        "activities": (1, 2, 3, 4, 6, 7, 12, 13, 16, 17),
        "label_rule": "majority",
        "normalize": "none",
    },
    "pfllib": {
        "window": 256,
        "stride": 128,
        "activities": (1, 2, 3, 4, 5, 6, 7, 12, 13, 16, 17, 24),
        "label_rule": "min",
        "normalize": "subject_maxabs",
    },
}
ACTIVITY_NAMES = {
    1: "lying",
    2: "sitting",
    3: "standing",
    4: "walking",
    5: "running",
    6: "cycling",
    7: "Nordic walking",
    9: "watching TV",
    10: "computer work",
    11: "car driving",
    12: "ascending stairs",
    13: "descending stairs",
    16: "vacuum cleaning",
    17: "ironing",
    18: "folding laundry",
    19: "house cleaning",
    20: "playing soccer",
    24: "rope jumping",
}

PAMAP2_SOURCE = Source(
    layout="pamap2/PAMAP2_Dataset/Protocol/subject101.dat … subject109.dat (+ Optional/ with dataset_params.include_optional)",
    how_to_get="run `fedbench datasets download pamap2` (PAMAP2_Dataset.zip from the UCI repository, dataset 231, unpacked in place)",
    downloads=(
        Download(
            "https://archive.ics.uci.edu/ml/machine-learning-databases/00231/PAMAP2_Dataset.zip",
            "PAMAP2_Dataset.zip",
            extract=True,
        ),
    ),
    license="CC BY 4.0 (unverified)",
    notes=("The FedAP 10-class activity list is inferred; see the module docstring.",),
)
PAMAP2_META = DatasetMeta("pamap2", 10, (27, 1, 200), (), (), used_by=("fedtr",), group_kind="subject")


def read_dat(path: Path) -> np.ndarray:
    try:
        table = np.loadtxt(path, dtype=np.float32, ndmin=2)
    except (OSError, ValueError) as error:
        raise DataError(f"dataset 'pamap2': cannot parse {path} ({error}); download and unpack it again") from None
    if table.shape[1] != 54:
        raise DataError(f"dataset 'pamap2': {path} has {table.shape[1]} columns, expected 54")
    return table


def fill_gaps(signals: np.ndarray) -> np.ndarray:
    """Linear interpolation over NaNs (dropped wireless packets), per channel; all-NaN channels become 0."""
    out = signals.copy()
    positions = np.arange(len(out))
    for channel in range(out.shape[1]):
        column = out[:, channel]
        missing = np.isnan(column)
        if missing.all():
            column[:] = 0.0
        elif missing.any():
            column[missing] = np.interp(positions[missing], positions[~missing], column[~missing])
    return out


def windows(
    signals: np.ndarray, activity: np.ndarray, window: int, stride: int, label_rule: str, activities: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    if len(signals) < window:
        return np.empty((0, signals.shape[1], 1, window), np.float32), np.empty(0, np.int64)
    starts = np.arange(0, len(signals) - window + 1, stride)
    index = starts[:, None] + np.arange(window)
    window_activity = activity[index]  # (W, T)
    if label_rule == "majority":
        values = np.array(sorted(set(np.unique(activity).tolist())))
        counts = (window_activity[:, :, None] == values).sum(1)  # (W, V)
        labels = values[counts.argmax(1)]
    elif label_rule == "min":
        # PFLlib: np.unique(window)[0], the smallest id present, 0 (transient) included → such windows are dropped.
        labels = window_activity.min(1)
    else:
        raise ConfigError(f"dataset_params.label_rule={label_rule!r} for pamap2; choose 'majority' or 'min'")
    keep = np.isin(labels, activities)
    class_of = {a: i for i, a in enumerate(activities)}
    y = np.array([class_of[int(a)] for a in labels[keep]], dtype=np.int64)
    x = signals[index[keep]].transpose(0, 2, 1)[:, :, None, :]  # (W, C, 1, T)
    return np.ascontiguousarray(x, dtype=np.float32), y


@register_dataset(
    PAMAP2_META,
    source=PAMAP2_SOURCE,
    files=tuple(f"PAMAP2_Dataset/Protocol/subject{s}.dat" for s in PROTOCOL_SUBJECTS),
    activity_names=ACTIVITY_NAMES,
    num_groups=9,
)
def load_pamap2(
    root: Path,
    verify: bool = True,
    preset: str = "fedap",
    window: int | None = None,
    stride: int | None = None,
    activities: tuple[int, ...] | list[int] | None = None,
    label_rule: str | None = None,
    normalize: str | None = None,
    include_optional: bool = False,
    subjects: tuple[int, ...] | list[int] | None = None,
    test_fraction: float = 0.2,
    split_seed: int = 0,
) -> DatasetArrays:
    """Window the protocol recordings of every subject; a stratified ``test_fraction`` of the windows
    (fixed ``split_seed``) is the global test set (FedTR proposal: 80/20). Preset values can be overridden."""
    if preset not in PRESETS:
        raise ConfigError(f"dataset_params.preset={preset!r} for pamap2; choose one of {', '.join(PRESETS)}")
    config: dict[str, Any] = dict(PRESETS[preset])
    for key, value in (
        ("window", window),
        ("stride", stride),
        ("activities", None if activities is None else tuple(activities)),
        ("label_rule", label_rule),
        ("normalize", normalize),
    ):
        if value is not None:
            config[key] = value
    if config["window"] < 1 or config["stride"] < 1:
        raise ConfigError("dataset_params.window and stride must be ≥ 1")
    if config["normalize"] not in ("none", "subject_maxabs"):
        raise ConfigError(f"dataset_params.normalize={config['normalize']!r}; choose 'none' or 'subject_maxabs'")
    chosen = tuple(subjects) if subjects else PROTOCOL_SUBJECTS
    files = [f"PAMAP2_Dataset/Protocol/subject{s}.dat" for s in chosen]
    if include_optional:
        files += [f"PAMAP2_Dataset/Optional/subject{s}.dat" for s in OPTIONAL_SUBJECTS if s in chosen]
    info = verify_files("pamap2", root, [FileSpec(f) for f in files], PAMAP2_SOURCE.how_to_get, verify)
    xs, ys, gs = [], [], []
    for rel in files:
        subject = int(rel[-7:-4])
        table = read_dat(root / rel)
        signals = fill_gaps(table[:, IMU_COLUMNS])
        if config["normalize"] == "subject_maxabs":
            scale = np.abs(signals).max(0)
            signals = signals / np.where(scale > 0, scale, 1.0)
        x, y = windows(
            signals,
            table[:, 1].astype(np.int64),
            config["window"],
            config["stride"],
            config["label_rule"],
            config["activities"],
        )
        xs.append(x)
        ys.append(y)
        gs.append(np.full(len(y), chosen.index(subject), dtype=np.int64))
    x, y, groups = np.concatenate(xs), np.concatenate(ys), np.concatenate(gs)
    meta = replace(
        PAMAP2_META, num_classes=len(config["activities"]), input_shape=(len(IMU_COLUMNS), 1, config["window"])
    )
    info.update(
        preset=preset,
        window=config["window"],
        stride=config["stride"],
        label_rule=config["label_rule"],
        normalize=config["normalize"],
        activities=list(config["activities"]),
    )
    return from_pool(meta, x, y, groups, test_fraction, split_seed, info, [f"subject{s}" for s in chosen])
