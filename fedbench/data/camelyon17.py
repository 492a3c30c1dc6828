"""Camelyon17-WILDS: 96×96 H&E patches, label = tumour in the central 32×32, one hospital per client.

Read directly from the WILDS layout (no ``wilds`` dependency): ``camelyon17/camelyon17_v1.0/metadata.csv``
(index column, patient, node, x_coord, y_coord, tumor, slide, center, split) and
``patches/patient_{PPP}_node_{N}/patch_patient_{PPP}_node_{N}_x_{X}_y_{Y}.png``. Decoding 455,954 PNGs
takes a while: run ``fedbench datasets prepare camelyon17`` once; later loads memory-map the result.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import NONE3, cap_per_group, holdout_split
from fedbench.data.files import Download, FileSpec, Source, verify_files
from fedbench.data.images import read_images
from fedbench.errors import ConfigError, DataError

FOLDER = "camelyon17_v1.0"
CAMELYON_SOURCE = Source(
    layout="camelyon17/camelyon17_v1.0/{metadata.csv,patches/patient_*_node_*/patch_*.png} (WILDS v1.0 archive unpacked)",
    how_to_get="run `fedbench datasets download camelyon17` (WILDS archive, 10.7 GB) or `pip install wilds` and "
    "wilds.get_dataset('camelyon17', download=True, root_dir=<data root>/camelyon17)",
    downloads=(
        Download(
            "https://worksheets.codalab.org/rest/bundles/0xe45e15f39fb54e9d9e919556af67aabe/contents/blob/",
            "camelyon17_v1.0.tar.gz",
            extract=True,
            size=10658709504,
        ),
    ),
    license="CC0",
)
CAMELYON_META = DatasetMeta("camelyon17", 2, (3, 96, 96), *NONE3, used_by=("lgmix",), group_kind="hospital")


def read_metadata(path: Path) -> dict[str, np.ndarray]:
    try:
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as error:
        raise DataError(f"dataset 'camelyon17': cannot read {path} ({error}); download it again") from None
    needed = ("patient", "node", "x_coord", "y_coord", "tumor", "center", "split")
    if not rows or any(k not in rows[0] for k in needed):
        raise DataError(
            f"dataset 'camelyon17': {path} lacks columns {', '.join(needed)}; delete it and download it again"
        )
    for number, row in enumerate(rows, 2):  # a row cut short reads as None fields, which would cast to garbage
        if any(row[k] in (None, "") for k in needed):
            raise DataError(
                f"dataset 'camelyon17': {path} has a malformed row (line {number}: fields missing); "
                "delete it and download it again"
            )
    try:
        out = {k: np.array([r[k] for r in rows]) for k in needed}
        for key in ("node", "x_coord", "y_coord", "tumor", "center", "split"):
            out[key] = out[key].astype(np.float64).astype(np.int64)
    except (ValueError, TypeError) as error:  # a row cut short (None) or a non-number
        raise DataError(
            f"dataset 'camelyon17': {path} has a malformed row ({error}); delete it and download it again"
        ) from None
    return out


def patch_path(patient: str, node: int, x: int, y: int) -> str:
    patient = f"{int(patient):03d}"
    return f"patches/patient_{patient}_node_{node}/patch_patient_{patient}_node_{node}_x_{x}_y_{y}.png"


@register_dataset(
    CAMELYON_META,
    source=CAMELYON_SOURCE,
    files=(f"{FOLDER}/metadata.csv",),
    group_names=tuple(f"hospital{i}" for i in range(1, 6)),
    num_groups=5,
)
def load_camelyon17(
    root: Path,
    verify: bool = True,
    split: str = "hospital",
    test_fraction: float = 0.2,
    split_seed: int = 0,
    max_per_client: int | None = None,
    image_size: int = 96,
) -> DatasetArrays:
    """``split='hospital'`` (LG-Mix/HarmoFL: every hospital is a client with its own stratified held-out
    ``test_fraction``); ``'official'``: WILDS' split — train = centers 0, 3, 4 with split==0, test = center 2.
    ``max_per_client`` keeps a seeded random subset per hospital (laptop-scale runs)."""
    info = verify_files("camelyon17", root, [FileSpec(f"{FOLDER}/metadata.csv")], CAMELYON_SOURCE.how_to_get, verify)
    meta_table = read_metadata(root / FOLDER / "metadata.csv")
    labels, centers = meta_table["tumor"], meta_table["center"]
    if split == "hospital":
        keep = cap_per_group(labels, centers, max_per_client, split_seed)
        train, test = holdout_split(labels[keep], test_fraction, split_seed, centers[keep])
        train, test = keep[train], keep[test]
    elif split == "official":
        train = np.flatnonzero(np.isin(centers, (0, 3, 4)) & (meta_table["split"] == 0))
        test = np.flatnonzero(centers == 2)
        if max_per_client is not None:
            train = train[cap_per_group(labels[train], centers[train], max_per_client, split_seed)]
            test = test[cap_per_group(labels[test], centers[test], max_per_client, split_seed)]
    else:
        raise ConfigError(f"dataset_params.split={split!r} for camelyon17; choose 'hospital' or 'official'")

    def images(rows: np.ndarray) -> np.ndarray:
        paths = [
            root
            / FOLDER
            / patch_path(
                meta_table["patient"][i], meta_table["node"][i], meta_table["x_coord"][i], meta_table["y_coord"][i]
            )
            for i in rows
        ]
        return read_images(paths, image_size, "RGB", "camelyon17")

    info.update(
        split=split,
        test_fraction=test_fraction,
        split_seed=split_seed,
        max_per_client=max_per_client,
        group_names=[f"hospital{i}" for i in range(1, 6)],
    )
    return DatasetArrays(
        replace(CAMELYON_META, input_shape=(3, image_size, image_size)),
        images(train),
        labels[train],
        images(test),
        labels[test],
        train_groups=centers[train],
        test_groups=centers[test],
        info=info,
    )
