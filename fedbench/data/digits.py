"""scikit-learn's bundled 8×8 handwritten digits (1,797 images, 10 classes): quickstart data that
needs no download."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta

META = DatasetMeta(
    name="digits",
    num_classes=10,
    input_shape=(1, 8, 8),
    mean=(0.3053,),
    std=(0.3759,),
    used_by=("quickstart",),
)


# counts: the default 80/20 stratified split of scikit-learn's 1,797 images
@register_dataset(META, source="bundled with scikit-learn (sklearn.datasets.load_digits)", counts=(1437, 360))
def load_digits(root: Path, test_fraction: float = 0.2, split_seed: int = 0) -> DatasetArrays:
    """Stratified held-out test split with a fixed split seed (independent of the run seed, so every
    run of every method is evaluated on the same test images)."""
    # local: keeps scikit-learn out of datasets' and run's start-up
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    bunch = sklearn_digits()
    # Pixel values are 0..16; rescale to the uint8 0..255 convention every image loader uses.
    images = np.round(bunch.images * (255.0 / 16.0)).astype(np.uint8)[:, None, :, :]
    labels = bunch.target.astype(np.int64)
    train_idx, test_idx = train_test_split(
        np.arange(len(labels)), test_size=test_fraction, random_state=split_seed, stratify=labels
    )
    return DatasetArrays(
        meta=META,
        train_x=images[train_idx],
        train_y=labels[train_idx],
        test_x=images[test_idx],
        test_y=labels[test_idx],
        info={"source": "sklearn.datasets.load_digits", "verified": True},
    )
