"""The data set ``sitedigits``: handwritten digits from three sites, one folder per site and class.

A loader is registered with its static metadata (``DatasetMeta``) and reads ``root`` = ``<data root>/sitedigits``
(``--data-dir`` or ``$FEDBENCH_DATA``); its keyword parameters with their defaults are the data set's
``dataset_params``. It returns uint8 images (N, C, H, W) and labels, split into train and test, with each image's
site as its natural group (``partition = "natural"``: one client per site). What is missing is one ``DataError``
saying how to get it; what was read goes in ``info``, which every run's provenance records.

The layout is ``<site>/<class>/*.png`` (``make_sites.py`` writes it), the one fedbench's generic ``imagefolder``
loader reads as well: ``dataset = "imagefolder"`` with ``dataset_params = { path = "sitedigits", image_size = 8,
channels = 1 }`` needs no code at all. This loader shows what one of one's own looks like.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from fedbench.data import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.files import Source
from fedbench.errors import ConfigError, DataError
from PIL import Image

NAME = "sitedigits"
META = DatasetMeta(
    name=NAME,
    num_classes=10,
    input_shape=(1, 8, 8),
    mean=(0.2560,),  # of the three sites' pixels, scaled to [0, 1] (make_sites.py's default 20 images per class)
    std=(0.3338,),
    used_by=("my-fl-method",),
    group_kind="site",
)
HOW_TO_GET = "python -m my_fl_method.make_sites <data root>/sitedigits"


SOURCE = Source(
    layout="<data root>/sitedigits/<site>/<class 0-9>/*.png, 8×8 gray",
    how_to_get=f"`{HOW_TO_GET}` writes them from scikit-learn's digits",
)


@register_dataset(META, source=SOURCE, present=lambda folder: folder.is_dir())
def load_sitedigits(root: Path, test_fraction: float = 0.2, split_seed: int = 0) -> DatasetArrays:
    """test_fraction: the share of each site's images of each class held out for testing, drawn with split_seed
    (the same for every run, so every method is scored on the same images)."""
    if not 0 < test_fraction < 1:
        raise ConfigError(f"dataset_params.test_fraction={test_fraction} for {NAME} must be between 0 and 1")
    sites = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    if not sites:
        raise DataError(f"dataset {NAME!r}: no site folders in {root}; write them with `{HOW_TO_GET}`")
    files = [
        (group, label, png)
        for group, site in enumerate(sites)
        for label in range(META.num_classes)
        for png in sorted((site / str(label)).glob("*.png"))
    ]
    images = np.stack([read_image(png) for _, _, png in files])[:, None]  # (N, 1, 8, 8)
    labels = np.array([label for _, label, _ in files], dtype=np.int64)
    groups = np.array([group for group, _, _ in files], dtype=np.int64)
    test = held_out(labels, groups, test_fraction, split_seed)
    digests = {png.relative_to(root).as_posix(): hashlib.sha256(png.read_bytes()).hexdigest() for _, _, png in files}
    info = {
        "source": str(root),
        "verified": False,
        "verification": "no published checksums: the sha256 of every file read is recorded",
        "files": list(digests),
        "digests": digests,
        "group_names": [site.name for site in sites],
    }
    return DatasetArrays(
        META, images[~test], labels[~test], images[test], labels[test], groups[~test], groups[test], info=info
    )


def read_image(path: Path) -> np.ndarray:
    try:
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("L"))
    except OSError as error:  # missing, unreadable, or not an image
        raise DataError(
            f"dataset {NAME!r}: cannot read {path} ({error}); write the sites again: `{HOW_TO_GET}`"
        ) from None
    if pixels.shape != META.input_shape[1:]:
        raise DataError(f"dataset {NAME!r}: {path} is {pixels.shape[1]}×{pixels.shape[0]} pixels, not 8×8")
    return pixels


def held_out(labels: np.ndarray, groups: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A seeded ``fraction`` of every (site, class), as a mask: every site is tested on its own images."""
    rng = np.random.default_rng(seed)
    test = np.zeros(len(labels), dtype=bool)
    for group, label in sorted(set(zip(groups.tolist(), labels.tolist(), strict=True))):
        members = np.flatnonzero((groups == group) & (labels == label))
        test[rng.permutation(members)[: round(fraction * len(members))]] = True
    return test
