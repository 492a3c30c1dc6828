"""Retinal optic disc/cup segmentation (fedbench/data/retinal.py) from tiny files in its official layout, and the DoFE
"Fundus" gray masks (0 = cup, 128 = rim, 255 = background, thresholded at 50 / 200 as the DoFE authors' loaders do,
so interpolated border values land in a class)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import data_fixtures as fx
from fedbench.data import load_dataset
from fedbench.data.retinal import masks_from_gray
from fedbench.errors import DataError


def test_retinal_segmentation(tmp_path):
    fx.write_retinal(tmp_path)
    arrays = load_dataset("retinal", tmp_path, image_size=40)
    assert arrays.meta.task == "segmentation"
    assert arrays.train_x.shape == (4, 3, 40, 40) and arrays.train_y.shape == (4, 2, 40, 40)
    disc, cup = arrays.train_y[0]
    assert disc.sum() == 400 and cup.sum() == 100  # disc = rim + cup (20×20), cup 10×10
    assert arrays.info["group_names"] == ["Domain1", "Domain2"]
    only_two = load_dataset("retinal", tmp_path, sites=["Domain2"], image_size=20)
    assert len(only_two.train_x) == 2 and only_two.train_y.shape[-1] == 20
    with pytest.raises(DataError, match="Domain7"):
        load_dataset("retinal", tmp_path, sites=["Domain7"])


def test_masks_from_gray_thresholds():
    gray = np.array([0, 17, 50, 51, 112, 128, 144, 200, 201, 247, 254, 255], np.uint8).reshape(1, 1, 1, -1)
    disc, cup = masks_from_gray(gray)[0, :, 0]
    assert disc.tolist() == [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    assert cup.tolist() == [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert masks_from_gray(gray).dtype == np.uint8


def clean_mask(size: int) -> np.ndarray:
    """Disc (rim + cup) the central half, cup the central quarter, as a 0/128/255 gray mask."""
    mask = np.full((size, size), 255, np.uint8)
    mask[size // 4 : 3 * size // 4, size // 4 : 3 * size // 4] = 128
    mask[3 * size // 8 : 5 * size // 8, 3 * size // 8 : 5 * size // 8] = 0
    return mask


def write_site(root, masks: list[np.ndarray]) -> None:
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        base = root / "retinal" / "Fundus" / "Domain1" / split / "ROIs"
        for k, mask in enumerate(masks):
            fx.write_png(base / "image" / f"g{k:04d}.png", rng.integers(0, 256, (*mask.shape, 3), dtype=np.uint8))
            fx.write_png(base / "mask" / f"g{k:04d}.png", mask)


def test_retinal_masks_with_interpolated_borders(tmp_path):
    ringed = clean_mask(40)  # disc rows/cols 10..29, cup 15..24
    ringed[9, 10:30] = 247  # background next to the disc, ringing
    ringed[30, 10:30] = 254
    ringed[10, 10:30] = 144  # rim edge overshoot / undershoot
    ringed[29, 10:30] = 112
    ringed[15, 15:25] = 17  # cup edge
    # A clean mask downsampled 80 → 40 with Pillow's default filter for gray images (bicubic), as loaders that call
    # ``mask.resize(size)`` without a filter do; it holds values such as 8, 120, 144, 247.
    bicubic = np.asarray(Image.fromarray(clean_mask(80)).resize((40, 40), Image.Resampling.BICUBIC))
    assert len(np.unique(bicubic)) > 3
    write_site(tmp_path, [clean_mask(40), ringed, bicubic])
    arrays = load_dataset("retinal", tmp_path, image_size=40, use_prepared=False)
    assert arrays.train_y.shape == (3, 2, 40, 40) and set(np.unique(arrays.train_y)) == {0, 1}
    for disc, cup in arrays.train_y:
        assert disc.sum() == 400 and cup.sum() == 100  # 20×20 disc (cup included), 10×10 cup
        assert (cup <= disc).all()
    small = load_dataset("retinal", tmp_path, image_size=20, use_prepared=False)  # nearest resize of the masks
    assert [int(d.sum()) for d, _ in small.train_y] == [100] * 3
    assert [int(c.sum()) for _, c in small.train_y] == [25] * 3
